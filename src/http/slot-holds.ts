/**
 * Concurrency slots (algorithms/concurrency.ts) held by the requests this
 * thread forwards. An allowed request's slots are given back once when its
 * exchange ends in any way: the response's 'close' (sent whole; or the
 * client gone, whereupon the proxy drops the upstream call; a backend error
 * or timeout answered 502/504; an LLM stream cut), or an upgraded socket's.
 * A rejected request gives back at once what its shadow rules took. The
 * give-backs of one event-loop turn leave together in one store.adjust (one
 * script call or statement for many ended exchanges under load, as the
 * stores batch their checks). While a request lasts, its slots are renewed
 * every third of their lease (one adjust: give back at the old time, take
 * now), so a live request keeps its slot past the lease while a dead
 * process's slots free themselves. A failed give-back is dropped (counted,
 * logged): the slot then frees at its lease end; a failed renewal is tried
 * again a tick later.
 */
import type { Decision, HeldSlot } from '../engine/decision.js'
import type { Adjustment, Store } from '../store/store.js'

/** What ends an exchange: a ServerResponse, or an upgraded socket. */
export interface ExchangeEnd {
  readonly closed: boolean
  on(event: 'close', listener: () => void): unknown
}

/** Longest interval between two looks for slots due a renewal. */
const MAX_TICK_MS = 1000

const kHold = Symbol('slot hold')
type Ending = ExchangeEnd & { [kHold]?: Hold }

interface Hold {
  readonly owner: SlotHolds
  readonly slots: readonly HeldSlot[]
  /** When the slots were taken or last renewed (epoch seconds): the give-back names it. */
  at: number
  /** Epoch ms at which they are renewed if still held. */
  renewAt: number
  readonly renewMs: number
  /** `renewing`: a renewal is out (a give-back waits for it); `ending`: one is, and the exchange has ended. */
  state: 'held' | 'renewing' | 'ending' | 'done'
}

export class SlotHolds {
  private readonly live = new Set<Hold>()
  private timer: NodeJS.Timeout | undefined
  private tickMs = MAX_TICK_MS
  /** Give-backs sent and answered, and those the store failed (their slots free at their lease end). */
  released = 0
  dropped = 0
  /** Policies that held slots once: their gauge reads 0 rather than vanishing. */
  private readonly seen = new Set<string>()
  /** Give-backs of this event-loop turn, sent together (flush). */
  private outbox: Adjustment[] = []
  private outboxHolds = 0

  constructor(
    private readonly store: Store,
    /** Epoch ms. */
    private readonly clock: () => number,
    /** A give-back or renewal the store failed. */
    private readonly onDropped: (err: Error) => void = () => undefined,
  ) {}

  /**
   * Holds a decision's slots until `end` closes (at once if it already has,
   * or if the decision is a reject). Nothing to do for a decision without.
   */
  holdUntilClosed(d: Decision, end: ExchangeEnd): void {
    const slots = d.held
    if (slots === undefined) return
    let renewS = slots[0]!.renewS
    for (const s of slots) if (s.renewS < renewS) renewS = s.renewS
    const renewMs = renewS * 1000
    const h: Hold = { owner: this, slots, at: slots[0]!.at, renewAt: slots[0]!.at * 1000 + renewMs, renewMs, state: 'held' }
    if (!d.allowed || end.closed) return this.giveBack(h)
    this.live.add(h)
    this.watch(renewMs)
    ;(end as Ending)[kHold] = h
    // `on`, not `once` (no wrapper per request): 'close' comes once, and onEnd forgets the hold.
    end.on('close', onEnd)
  }

  /** Slots held now, per policy (the in-flight gauge; counted when scraped, not per request). */
  get inFlight(): Map<string, number> {
    const out = new Map<string, number>()
    for (const p of this.seen) out.set(p, 0)
    for (const h of this.live) for (const s of h.slots) out.set(s.policyId, (out.get(s.policyId) ?? 0) + 1)
    for (const p of out.keys()) this.seen.add(p)
    return out
  }

  /** The exchange of `h` ended: its slots go back now, or once a renewal under way answers. */
  end(h: Hold): void {
    if (h.state === 'held') this.giveBack(h)
    else if (h.state === 'renewing') h.state = 'ending'
  }

  private giveBack(h: Hold): void {
    this.live.delete(h)
    h.state = 'done'
    for (const s of h.slots) this.outbox.push({ key: s.key, limit: s.limit, amount: s.cost, at: h.at })
    if (this.outboxHolds++ === 0) setImmediate(this.flush)
  }

  /** Sends the give-backs of the turn that ended, in one store call. */
  private readonly flush = (): void => {
    const out = this.outbox
    const n = this.outboxHolds
    this.outbox = []
    this.outboxHolds = 0
    this.store.adjust(out, this.clock() / 1000, (err) => {
      if (err === null) return void (this.released += n)
      this.dropped += n
      this.onDropped(err)
    })
  }

  /** Look for renewals at least every half of the shortest renewal period held. */
  private watch(renewMs: number): void {
    const tick = Math.max(1, Math.min(MAX_TICK_MS, renewMs / 2))
    if (this.timer !== undefined && tick >= this.tickMs) return
    if (this.timer !== undefined) clearInterval(this.timer)
    this.tickMs = tick
    this.timer = setInterval(() => this.renewDue(), tick)
    this.timer.unref()
  }

  private renewDue(): void {
    if (this.live.size === 0) {
      clearInterval(this.timer)
      this.timer = undefined
      this.tickMs = MAX_TICK_MS
      return
    }
    const now = this.clock()
    for (const h of this.live) if (h.state === 'held' && h.renewAt <= now) this.renew(h, now)
  }

  private renew(h: Hold, nowMs: number): void {
    h.state = 'renewing'
    const at = nowMs / 1000
    const out: Adjustment[] = []
    for (const s of h.slots)
      out.push({ key: s.key, limit: s.limit, amount: s.cost, at: h.at }, { key: s.key, limit: s.limit, amount: -s.cost, at })
    this.store.adjust(out, at, (err) => {
      if (err === null) {
        h.at = at
        h.renewAt = nowMs + h.renewMs
      } else this.onDropped(err) // still under the old time: the next tick tries again
      const ending = h.state === 'ending'
      h.state = 'held'
      if (ending) this.giveBack(h)
    })
  }

  /** Requests holding slots now (tests). */
  get holding(): number {
    return this.live.size
  }
}

/** 'close' listener shared by every held exchange (no closure per request). */
function onEnd(this: Ending): void {
  const h = this[kHold]
  if (h === undefined) return
  this[kHold] = undefined
  h.owner.end(h)
}
