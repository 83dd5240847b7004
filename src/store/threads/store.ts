/**
 * The in-process store over a SharedArrayBuffer table (table.ts) that every
 * worker thread of the process reads and writes. A call locks the buckets of
 * all its checks (ascending, each once) before reading any of them, so its
 * groups stay all-or-nothing across threads exactly as the single-thread
 * memory store makes them by running on one thread; the maths is the kinds'
 * own `step` / `adjust` on their packed cells, as in memory.ts.
 *
 * A check whose key needs a new slot claims it while its buckets are locked,
 * before anything is written; when the table has no slot for it without
 * dropping another key's live counter (table.ts), the check is refused with
 * `full` (fail-closed: the request is answered 503 store_full) and counted.
 */
import { CELLS, type Step } from '../../algorithms/algorithm.js'
import { InProcessStore, readOf } from '../in-process.js'
import type { Adjustment, Check, Outcome, Outcomes, StoreFill } from '../store.js'
import { RESERVED, type SharedTable } from './table.js'

/** slotOf before a check's slot is looked up. */
const UNKNOWN = -3

/** Calls of up to this many checks sort their buckets by insertion. */
const SORT_BY_INSERTION = 16

export interface SharedStoreOptions {
  table: SharedTable
  /** Clock (epoch ms) for the expiry sweep, which then runs every second; no sweep timer without it. */
  clock?: () => number
  /** Buckets each sweep tick empties of expired slots (shared cursor over all threads). */
  sweepBuckets?: number
  /** Called on each check refused for want of a slot (observe/ logs it, throttled). */
  onFull?: () => void
}

export class SharedMemoryStore extends InProcessStore {
  readonly table: SharedTable
  private readonly onFull: (() => void) | undefined
  private readonly sweepBuckets: number
  /** Per check: its two buckets, fingerprint high, fingerprint low (scratch, grown on demand). */
  private loc = new Int32Array(4 * 8)
  /** The distinct buckets of one call, ascending (scratch). */
  private held = new Int32Array(16)
  /** Per check: its key's slot once looked up (UNKNOWN before; -1: none; -2: none needed), so each check looks once (scratch). */
  private slotOf = new Int32Array(8)
  /** Slots claimed by this call (scratch): released at its end if nothing was written to them. */
  private claimed: number[] = []

  constructor(opts: SharedStoreOptions) {
    super(opts.clock)
    this.table = opts.table
    this.onFull = opts.onFull
    this.sweepBuckets = opts.sweepBuckets ?? 4096
  }

  fill(): StoreFill {
    return this.table.fill()
  }

  protected sweepExpired(now: number): void {
    this.table.sweep(now, this.sweepBuckets)
  }

  applyNow(checks: readonly Check[], now: number, reads?: Outcomes): Outcomes {
    const n = checks.length
    const held = this.locate(checks)
    try {
      return this.evaluateGroups(checks, n, now, reads)
    } finally {
      this.unlockAll(held)
    }
  }

  adjust(adjustments: readonly Adjustment[], now: number, done: (err: Error | null) => void): void {
    for (const a of adjustments) {
      const held = this.locate([a])
      try {
        const r = a.limit.kind.adjust(this.stored(0, a.limit, now), a.limit, a.amount, now)
        // No slot for a new counter: the adjustment is dropped (counted), never made room for.
        if (r !== undefined && this.slotFor(0, r, now) !== -1) this.write(0, a.limit, r)
      } finally {
        this.unlockAll(held)
      }
    }
    done(null)
  }

  peek(check: Check, now: number): Outcome {
    const held = this.locate([check])
    try {
      return readOf(check, this.stored(0, check.limit, now), now)
    } finally {
      this.unlockAll(held)
    }
  }

  /** Drops the keys' counters from the table every worker counts on: each worker's next check of them starts afresh. */
  reset(keys: readonly string[], done: (err: Error | null) => void): void {
    for (const key of keys) {
      const held = this.locate([{ key }])
      try {
        const slot = this.find(0)
        if (slot >= 0) this.table.forget(slot)
      } finally {
        this.unlockAll(held)
      }
    }
    done(null)
  }

  /** Whether `key` holds a state that has not expired by `now` (tests, benchmarks). */
  has(key: string, now: number): boolean {
    const held = this.locate([{ key }])
    try {
      const s = this.find(0)
      return s !== -1 && this.table.expireAt[s]! > now
    } finally {
      this.unlockAll(held)
    }
  }

  /** Hash every key, then lock their distinct buckets (two per key) in ascending order. Returns how many are held. */
  private locate(checks: readonly { key: string }[]): number {
    const n = checks.length
    if (this.loc.length < n * 4) {
      this.loc = new Int32Array(n * 4)
      this.held = new Int32Array(n * 2)
      this.slotOf = new Int32Array(n)
    }
    this.slotOf.fill(UNKNOWN, 0, n)
    for (let i = 0; i < n; i++) this.table.locate(checks[i]!.key, this.loc, i)
    const held = n <= SORT_BY_INSERTION ? this.insertDistinct(n) : this.sortDistinct(n)
    for (let i = 0; i < held; i++) this.table.lock(this.held[i]!)
    return held
  }

  /** The two buckets of each of n checks into `held`, sorted and distinct, by insertion (a few checks: no allocation). */
  private insertDistinct(n: number): number {
    let held = 0
    for (let i = 0; i < n; i++) {
      for (let k = 0; k < 2; k++) {
        const b = this.loc[i * 4 + k]!
        let j = held
        while (j > 0 && this.held[j - 1]! > b) j--
        if (j > 0 && this.held[j - 1] === b) continue
        this.held.copyWithin(j + 1, j, held)
        this.held[j] = b
        held++
      }
    }
    return held
  }

  /** The same by a sort: insertion would take n²/4 moves for the thousands of checks a Rate Limit Service call may carry. */
  private sortDistinct(n: number): number {
    for (let i = 0; i < n; i++) {
      this.held[2 * i] = this.loc[i * 4]!
      this.held[2 * i + 1] = this.loc[i * 4 + 1]!
    }
    this.held.subarray(0, 2 * n).sort()
    let held = 1
    for (let i = 1; i < 2 * n; i++) if (this.held[i] !== this.held[held - 1]) this.held[held++] = this.held[i]!
    return held
  }

  /** Free the slots this call claimed and did not write, then unlock its `held` buckets. */
  private unlockAll(held: number): void {
    const claimed = this.claimed
    for (let i = 0; i < claimed.length; i++) this.table.release(claimed[i]!)
    claimed.length = 0
    for (let i = 0; i < held; i++) this.table.unlock(this.held[i]!)
  }

  private find(i: number): number {
    const l = this.loc
    return this.table.find(l[i * 4]!, l[i * 4 + 1]!, l[i * 4 + 2]!, l[i * 4 + 3]!)
  }

  /**
   * The slot check i's new state `s` will be written to (remembered in
   * slotOf for write()): its key's, else one claimed now; -2 when the state
   * carries no information (nothing to keep); -1 when the table has no slot
   * for it (counted, reported).
   */
  private slotFor(i: number, s: Step<unknown>, now: number): number {
    const t = this.table
    let slot = this.slotOf[i] === UNKNOWN ? this.find(i) : this.slotOf[i]!
    if (slot >= 0) {
      // The key's own expired counter: claimed like a new slot, or another key of this call could take it.
      if (t.expireAt[slot]! <= now && t.expireAt[slot] !== RESERVED) {
        t.expireAt[slot] = RESERVED
        this.claimed.push(slot)
      }
    } else if (s.expireAt <= now) slot = -2
    else {
      const l = this.loc
      slot = t.claim(l[i * 4]!, l[i * 4 + 1]!, l[i * 4 + 2]!, l[i * 4 + 3]!, now)
      if (slot === -1) this.onFull?.()
      else this.claimed.push(slot)
    }
    this.slotOf[i] = slot
    return slot
  }

  protected storedState(checks: readonly Check[], i: number, now: number): unknown {
    return this.stored(i, checks[i]!.limit, now)
  }

  protected hasRoom(_checks: readonly Check[], i: number, s: Step<unknown>, now: number): boolean {
    return this.slotFor(i, s, now) !== -1
  }

  protected soonestExpiry(): number {
    return this.table.soonest
  }

  protected writeState(checks: readonly Check[], i: number, s: Step<unknown>): void {
    this.write(i, checks[i]!.limit, s)
  }

  private stored(i: number, limit: Check['limit'], now: number): unknown {
    const t = this.table
    const slot = this.find(i)
    this.slotOf[i] = slot
    // A RESERVED slot (claimed earlier in this call, not written) reads as no state.
    if (slot === -1 || t.expireAt[slot]! <= now) return undefined
    return limit.kind.load(t.cells, slot * CELLS)
  }

  /** Write check i's state to the slot slotFor() found or claimed for it (none: the state carries nothing to keep). */
  private write(i: number, limit: Check['limit'], s: Step<unknown>): void {
    const t = this.table
    const slot = this.slotOf[i]!
    if (slot < 0) return
    limit.kind.save(s.state, t.cells, slot * CELLS)
    // A state that carries nothing still must not read as RESERVED (which release() would free).
    t.expireAt[slot] = s.expireAt === RESERVED ? 0 : s.expireAt
  }
}
