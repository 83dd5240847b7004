/**
 * Concurrency slots (algorithms/concurrency.ts) held by the requests this
 * thread forwards. An allowed request's slots are given back once when its
 * exchange ends in any way: the response's 'close' (sent whole; or the
 * client gone, whereupon the proxy drops the upstream call; a backend error
 * or timeout answered 502/504; an LLM stream cut), or an upgraded socket's.
 * A rejected request gives back at once what its shadow rules took.
 *
 * A give-back is the held slot itself (a HeldSlot is the Adjustment that
 * returns it). On an in-process store it is a direct decrement of the
 * counter, done as the exchange ends (Store.adjustNow: no call, no batch, no
 * allocation); on a remote store the give-backs of one event-loop turn leave
 * together in one store.adjust (one script call or statement for many ended
 * exchanges under load, as the stores batch their checks).
 *
 * While a request lasts, its slots are renewed every third of their lease
 * (one adjust: give back at the old time, take now), so a live request keeps
 * its slot past the lease while a dead process's slots free themselves. A
 * failed give-back is dropped (counted, logged): the slot then frees at its
 * lease end; a failed renewal is tried again a tick later. Held exchanges are
 * a linked list through their holds: taking and ending one touches no map.
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

const HELD = 0
/** A renewal is out: a give-back waits for its answer. */
const RENEWING = 1
/** A renewal is out and the exchange has ended: given back once it answers. */
const ENDING = 2
const DONE = 3

class Hold {
  prev: Hold | undefined = undefined
  next: Hold | undefined = undefined
  state = HELD

  constructor(
    readonly owner: SlotHolds,
    readonly slots: readonly HeldSlot[],
    /** Epoch ms at which they are renewed if still held. */
    public renewAt: number,
    readonly renewMs: number,
  ) {}
}

export class SlotHolds {
  /** The holds of exchanges not ended yet, newest first. */
  private head: Hold | undefined = undefined
  private live = 0
  private timer: NodeJS.Timeout | undefined
  private tickMs = MAX_TICK_MS
  /** Give-backs made (on a remote store: answered), and those the store failed (their slots free at their lease end). */
  released = 0
  dropped = 0
  /** Policies that held slots once: their gauge reads 0 rather than vanishing. */
  private readonly seen = new Set<string>()
  /** Remote stores: give-backs of this event-loop turn, sent together (flush), and how many exchanges they end. */
  private outbox: Adjustment[] = []
  private outboxHolds = 0
  private readonly direct: boolean

  constructor(
    private readonly store: Store,
    /** Epoch ms. */
    private readonly clock: () => number,
    /** A give-back or renewal the store failed. */
    private readonly onDropped: (err: Error) => void = () => undefined,
  ) {
    this.direct = store.adjustNow !== undefined
  }

  /**
   * Holds a decision's slots until `end` closes (at once if it already has,
   * or if the decision is a reject). Nothing to do for a decision without.
   */
  holdUntilClosed(d: Decision, end: ExchangeEnd): void {
    const slots = d.held
    if (slots === undefined) return
    if (!d.allowed || end.closed) return this.release(slots)
    let renewS = slots[0]!.renewS
    for (let i = 1; i < slots.length; i++) if (slots[i]!.renewS < renewS) renewS = slots[i]!.renewS
    const renewMs = renewS * 1000
    const h = new Hold(this, slots, slots[0]!.at * 1000 + renewMs, renewMs)
    h.next = this.head
    if (this.head !== undefined) this.head.prev = h
    this.head = h
    this.live++
    this.watch(renewMs)
    ;(end as Ending)[kHold] = h
    // `on`, not `once` (no wrapper per request): 'close' comes once, and onEnd forgets the hold.
    end.on('close', onEnd)
  }

  /** Slots held now, per policy (the in-flight gauge; counted when scraped, not per request). */
  get inFlight(): Map<string, number> {
    const out = new Map<string, number>()
    for (const p of this.seen) out.set(p, 0)
    for (let h = this.head; h !== undefined; h = h.next) for (const s of h.slots) out.set(s.policyId, (out.get(s.policyId) ?? 0) + 1)
    for (const p of out.keys()) this.seen.add(p)
    return out
  }

  /** The exchange of `h` ended: its slots go back now, or once a renewal under way answers. */
  end(h: Hold): void {
    if (h.state === HELD) this.giveBack(h)
    else if (h.state === RENEWING) h.state = ENDING
  }

  private giveBack(h: Hold): void {
    if (h.prev !== undefined) h.prev.next = h.next
    else this.head = h.next
    if (h.next !== undefined) h.next.prev = h.prev
    h.prev = h.next = undefined
    this.live--
    h.state = DONE
    this.release(h.slots)
  }

  /** Gives `slots` back: in place on an in-process store, else with the turn's other give-backs. */
  private release(slots: readonly HeldSlot[]): void {
    if (this.direct) {
      // A decrement where the counter is needs no clock (a read costs as much as the decrement): the
      // time the slot was taken stands for now, so the kind shifts no bucket and takes the slot from
      // its own; its next check brings the counter to its time (kinds/concurrency/kind.ts).
      for (let i = 0; i < slots.length; i++) this.store.adjustNow!(slots[i]!, slots[i]!.at)
      this.released++
      return
    }
    for (let i = 0; i < slots.length; i++) this.outbox.push(slots[i]!)
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
    if (this.live === 0) {
      clearInterval(this.timer)
      this.timer = undefined
      this.tickMs = MAX_TICK_MS
      return
    }
    const now = this.clock()
    for (let h = this.head; h !== undefined; h = h.next) if (h.state === HELD && h.renewAt <= now) this.renew(h, now)
  }

  private renew(h: Hold, nowMs: number): void {
    h.state = RENEWING
    const at = nowMs / 1000
    const out: Adjustment[] = []
    for (const s of h.slots)
      out.push({ key: s.key, limit: s.limit, amount: s.amount, at: s.at }, { key: s.key, limit: s.limit, amount: -s.amount, at })
    this.store.adjust(out, at, (err) => {
      if (err === null) {
        for (const s of h.slots) s.at = at
        h.renewAt = nowMs + h.renewMs
      } else this.onDropped(err) // still under the old time: the next tick tries again
      const ending = h.state === ENDING
      h.state = HELD
      if (ending) this.giveBack(h)
    })
  }

  /** Requests holding slots now (tests). */
  get holding(): number {
    return this.live
  }
}

/** 'close' listener shared by every held exchange (no closure per request). */
function onEnd(this: Ending): void {
  const h = this[kHold]
  if (h === undefined) return
  this[kHold] = undefined
  h.owner.end(h)
}
