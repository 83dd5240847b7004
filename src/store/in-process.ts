/**
 * What the two in-process stores (memory/store.ts on one thread, threads/store.ts
 * over a table every worker thread shares) have in common: they answer
 * synchronously, never fail, are ready at once and sweep expired counters
 * once a second. A subclass supplies applyNow, adjust, fill and the sweep.
 *
 * Both are bounded, and both make room for a new key only from counters that
 * carry no information (expired: a kind's `expireAt` is when forgetting its
 * state is lossless). A live counter is never dropped for another key, which
 * would hand its key a fresh limit; when there is no such room the check is
 * refused (`full`, answered 503 store_full whatever FAIRVISOR_FAIL_POLICY
 * says: the store is up, and letting the request through unlimited is what a
 * flood of new keys would be after).
 */
import type { Step } from '../algorithms/algorithm.js'
import type { Adjustment, ApplyDone, Check, Outcome, Outcomes, Store, StoreFill, StoreState } from './store.js'

/** Calls of up to this many checks find an earlier check of the same key by scanning back (no map to build per request). */
const SCAN_MAX = 8

/**
 * A call's tentative states, per check, are committed only if the check's
 * group passes; a check whose key an earlier allowed check of the call has
 * already charged starts from that check's state (one counter named twice is
 * charged twice, in turn). Past SCAN_MAX checks that state is kept in a map
 * by key as well, so a call of n checks (a Rate Limit Service call may carry
 * thousands) costs n look-ups, not n²/2 comparisons. Undefined: no map.
 */
const stagedByKey = (checks: readonly Check[]): Map<string, Step<unknown>> | undefined => (checks.length > SCAN_MAX ? new Map() : undefined)

/** The state staged by the latest earlier check of check i's key, if any (checks are staged in order). */
function earlierStaged(
  checks: readonly Check[],
  staged: readonly (Step<unknown> | undefined)[],
  byKey: Map<string, Step<unknown>> | undefined,
  i: number,
): Step<unknown> | undefined {
  const key = checks[i]!.key
  if (byKey !== undefined) return byKey.get(key)
  for (let j = i - 1; j >= 0; j--) {
    const s = staged[j]
    if (s !== undefined && checks[j]!.key === key) return s
  }
  return undefined
}

export abstract class InProcessStore implements Store {
  readonly kind = 'memory'
  private readonly sweeper: NodeJS.Timeout | undefined

  /** `clock` (epoch ms) starts the sweep timer, every second; no timer without it. */
  constructor(clock: (() => number) | undefined) {
    if (clock) {
      // Runs a second later at the earliest, once the subclass's constructor has set its fields.
      this.sweeper = setInterval(() => this.sweepExpired(clock() / 1000), 1000)
      this.sweeper.unref()
    }
  }

  /** The outcomes of `checks`, evaluated and committed now. */
  abstract applyNow(checks: readonly Check[], now: number, reads?: Outcomes): Outcomes

  abstract adjust(adjustments: readonly Adjustment[], now: number, done: (err: Error | null) => void): void

  /** Fill for the metrics: checks refused for want of room (`full`), bytes charged and the bound. */
  abstract fill(): StoreFill

  /** The admin API: `check`'s counter read without charging or writing anything. */
  abstract peek(check: Check, now: number): Outcome

  /** The admin API: drop the counters of `keys` (synchronous; `done` runs before reset() returns). */
  abstract reset(keys: readonly string[], done: (err: Error | null) => void): void

  /** One sweep-timer tick: drop counters that have expired by `now` (seconds). */
  protected abstract sweepExpired(now: number): void

  /** The stored state of check i's key (undefined: none, or expired). */
  protected abstract storedState(checks: readonly Check[], i: number, now: number): unknown
  /** Whether check i's new state `s` has a slot (its own, or one found now); false: no room without dropping a live counter. */
  protected abstract hasRoom(checks: readonly Check[], i: number, s: Step<unknown>, now: number): boolean
  /** When the first live counter expires (seconds): the Retry-After of a check refused for want of room. */
  protected abstract soonestExpiry(): number
  /** Write check i's state to the slot hasRoom() gave it. */
  protected abstract writeState(checks: readonly Check[], i: number, s: Step<unknown>): void

  /**
   * Evaluate the first n checks as groups (enforce, shadow): each check steps from the state an
   * earlier check of its key staged, else the stored one; a group is written only if no check of
   * it is rejected, and a rejected check's own commit (a kind that counts rejects) is written at
   * once. Both in-process stores run this on their own slots (one thread, or locked buckets).
   * With `reads`, a rejected group's checks are then charged and read back as their `onReject` says.
   */
  protected evaluateGroups(checks: readonly Check[], n: number, now: number, reads?: Outcomes): Outcomes {
    const out: Outcomes = new Array(n)
    // Tentative new states, per check index; committed only if the group passes.
    const staged: (Step<unknown> | undefined)[] = new Array(n)
    const byKey = stagedByKey(checks)
    let enforceRejected = false
    let shadowRejected = false
    for (let i = 0; i < n; i++) {
      const c = checks[i]!
      if (c.shadow ? shadowRejected : enforceRejected) continue
      const earlier = earlierStaged(checks, staged, byKey, i)
      const r = c.limit.kind.step(earlier !== undefined ? earlier.state : this.storedState(checks, i, now), c.limit, c.cost, now)
      if ((r.allowed || r.commit) && !this.hasRoom(checks, i, r, now)) {
        // No room for this key's counter: refused, and nothing of its group is written.
        out[i] = { allowed: false, value: 0, retryAfter: fullRetryAfter(this.soonestExpiry(), now), full: true }
        if (c.shadow) shadowRejected = true
        else enforceRejected = true
        continue
      }
      out[i] = { allowed: r.allowed, value: r.value, retryAfter: r.retryAfter }
      if (r.allowed) {
        staged[i] = r
        byKey?.set(c.key, r)
      } else {
        if (r.commit) this.writeState(checks, i, r)
        if (c.shadow) shadowRejected = true
        else enforceRejected = true
      }
    }
    for (let i = 0; i < n; i++) {
      const s = staged[i]
      const c = checks[i]!
      if (s === undefined || (c.shadow ? shadowRejected : enforceRejected)) continue
      this.writeState(checks, i, s)
    }
    if (reads !== undefined && (enforceRejected || shadowRejected)) this.readBack(checks, n, now, reads, [enforceRejected, shadowRejected])
    return out
  }

  /**
   * The read-backs of a rejected group's checks that carry `onReject` (store.ts OnReject): which
   * are charged is decided on the counters as the call left them, then they are charged in order
   * (a charge that finds no room for a new counter reads as refused `full`), then read again.
   */
  private readBack(checks: readonly Check[], n: number, now: number, reads: Outcomes, rejected: readonly boolean[]): void {
    const charged: number[] = []
    for (let i = 0; i < n; i++) {
      const c = checks[i]!
      if (c.onReject === undefined || !rejected[+c.shadow]) continue
      const found = this.storedState(checks, i, now)
      if (c.onReject === 'charge' || (c.onReject === 'over' && !c.limit.kind.step(found, c.limit, c.cost, now).allowed)) charged.push(i)
      else reads[i] = readOf(c, found, now)
    }
    for (const i of charged) {
      const c = checks[i]!
      const r = c.limit.kind.adjust(this.storedState(checks, i, now), c.limit, -c.cost, now)
      if (r === undefined) continue
      if (this.hasRoom(checks, i, r, now)) this.writeState(checks, i, r)
      else reads[i] = { allowed: false, value: 0, retryAfter: fullRetryAfter(this.soonestExpiry(), now), full: true }
    }
    for (const i of charged) reads[i] ??= readOf(checks[i]!, this.storedState(checks, i, now), now)
  }

  /** Synchronous: `done` runs before apply() returns. */
  apply(checks: readonly Check[], now: number, done: ApplyDone, reads?: Outcomes): void {
    done(null, this.applyNow(checks, now, reads))
  }

  state(): StoreState {
    return 'ok'
  }

  ready(): Promise<boolean> {
    return Promise.resolve(true)
  }

  async close(): Promise<void> {
    if (this.sweeper) clearInterval(this.sweeper)
  }
}

/** A counter read without charging it: a step of cost 0 on `state`, nothing written. */
export function readOf(c: Check, state: unknown, now: number): Outcome {
  const r = c.limit.kind.step(state, c.limit, 0, now)
  return { allowed: r.allowed, value: r.value, retryAfter: r.retryAfter }
}

/** Retry-After (s) of a check refused for want of room: when the first counter that filled its candidates expires. */
export function fullRetryAfter(soonest: number, now: number): number {
  return Number.isFinite(soonest) ? Math.max(1, Math.ceil(soonest - now)) : 1
}
