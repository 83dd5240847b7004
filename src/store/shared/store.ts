/**
 * The in-process store over a SharedArrayBuffer table (table.ts) that every
 * worker thread of the process reads and writes. A call locks the buckets of
 * all its checks (ascending, each once) before reading any of them, so its
 * groups stay all-or-nothing across threads exactly as the single-thread
 * memory store makes them by running on one thread; the maths is the kinds'
 * own `step` / `adjust` on their packed cells, as in memory.ts.
 */
import { CELLS, type Step } from '../../algorithms/algorithm.js'
import { earlierStaged, InProcessStore, stagedByKey } from '../in-process.js'
import type { Adjustment, Check, Outcomes } from '../store.js'
import { hashKey, SLOT_BYTES, type SharedTable } from './table.js'

/** Calls of up to this many checks sort their buckets by insertion. */
const SORT_BY_INSERTION = 16

export interface SharedStoreOptions {
  table: SharedTable
  /** Clock (epoch ms) for the expiry sweep, which then runs every second; no sweep timer without it. */
  clock?: () => number
  /** Buckets each sweep tick empties of expired slots (shared cursor over all threads). */
  sweepBuckets?: number
  /** Called on each eviction (observe/ logs it, throttled). */
  onEvict?: () => void
}

export class SharedMemoryStore extends InProcessStore {
  readonly table: SharedTable
  private readonly onEvict: (() => void) | undefined
  private readonly sweepBuckets: number
  /** Per check: bucket, fingerprint high, fingerprint low (scratch, grown on demand). */
  private loc = new Int32Array(3 * 8)
  /** The distinct buckets of one call, ascending (scratch). */
  private held = new Int32Array(8)

  constructor(opts: SharedStoreOptions) {
    super(opts.clock)
    this.table = opts.table
    this.onEvict = opts.onEvict
    this.sweepBuckets = opts.sweepBuckets ?? 4096
  }

  fill(): { evictions: number; bytesUsed: number; maxBytes: number } {
    return { evictions: this.table.evictions, bytesUsed: this.table.used * SLOT_BYTES, maxBytes: this.table.bytes }
  }

  protected sweepExpired(now: number): void {
    this.table.sweep(now, this.sweepBuckets)
  }

  applyNow(checks: readonly Check[], now: number): Outcomes {
    const n = checks.length
    const held = this.locate(checks)
    try {
      return this.evaluate(checks, n, now)
    } finally {
      for (let i = 0; i < held; i++) this.table.unlock(this.held[i]!)
    }
  }

  adjust(adjustments: readonly Adjustment[], now: number, done: (err: Error | null) => void): void {
    for (const a of adjustments) {
      this.locate([a])
      const bucket = this.loc[0]!
      try {
        const r = a.limit.kind.adjust(this.stored(0, a.limit, now), a.limit, a.amount, now)
        if (r !== undefined) this.write(0, a.limit, r, now)
      } finally {
        this.table.unlock(bucket)
      }
    }
    done(null)
  }

  /** Whether `key` holds a state that has not expired by `now` (tests, benchmarks). */
  has(key: string, now: number): boolean {
    this.locate([{ key }])
    try {
      const s = this.table.find(this.loc[0]!, this.loc[1]!, this.loc[2]!)
      return s !== -1 && this.table.expireAt[s]! > now
    } finally {
      this.table.unlock(this.loc[0]!)
    }
  }

  /** Hash every key, then lock their distinct buckets in ascending order. Returns how many are held. */
  private locate(checks: readonly { key: string }[]): number {
    const n = checks.length
    if (this.loc.length < n * 3) {
      this.loc = new Int32Array(n * 3)
      this.held = new Int32Array(n)
    }
    const buckets = this.table.buckets
    for (let i = 0; i < n; i++) hashKey(checks[i]!.key, buckets, this.loc, i)
    const held = n <= SORT_BY_INSERTION ? this.insertDistinct(n) : this.sortDistinct(n)
    for (let i = 0; i < held; i++) this.table.lock(this.held[i]!)
    return held
  }

  /** The buckets of n checks into `held`, sorted and distinct, by insertion (a few checks: no allocation). */
  private insertDistinct(n: number): number {
    let held = 0
    for (let i = 0; i < n; i++) {
      const b = this.loc[i * 3]!
      let j = held
      while (j > 0 && this.held[j - 1]! > b) j--
      if (j > 0 && this.held[j - 1] === b) continue
      this.held.copyWithin(j + 1, j, held)
      this.held[j] = b
      held++
    }
    return held
  }

  /** The same by a sort: insertion would take n²/4 moves for the thousands of checks a Rate Limit Service call may carry. */
  private sortDistinct(n: number): number {
    for (let i = 0; i < n; i++) this.held[i] = this.loc[i * 3]!
    this.held.subarray(0, n).sort()
    let held = 1
    for (let i = 1; i < n; i++) if (this.held[i] !== this.held[held - 1]) this.held[held++] = this.held[i]!
    return held
  }

  /** memory.ts's applyNow, on the locked slots. */
  private evaluate(checks: readonly Check[], n: number, now: number): Outcomes {
    const out: Outcomes = new Array(n)
    const staged: (Step<unknown> | undefined)[] = new Array(n)
    const byKey = stagedByKey(checks)
    let enforceRejected = false
    let shadowRejected = false
    for (let i = 0; i < n; i++) {
      const c = checks[i]!
      if (c.shadow ? shadowRejected : enforceRejected) continue
      const earlier = earlierStaged(checks, staged, byKey, i)
      const r = c.limit.kind.step(earlier !== undefined ? earlier.state : this.stored(i, c.limit, now), c.limit, c.cost, now)
      out[i] = { allowed: r.allowed, value: r.value, retryAfter: r.retryAfter }
      if (r.allowed) {
        staged[i] = r
        byKey?.set(c.key, r)
      } else {
        if (r.commit) this.write(i, c.limit, r, now)
        if (c.shadow) shadowRejected = true
        else enforceRejected = true
      }
    }
    for (let i = 0; i < n; i++) {
      const s = staged[i]
      const c = checks[i]!
      if (s === undefined || (c.shadow ? shadowRejected : enforceRejected)) continue
      this.write(i, c.limit, s, now)
    }
    return out
  }

  private stored(i: number, limit: Check['limit'], now: number): unknown {
    const t = this.table
    const slot = t.find(this.loc[i * 3]!, this.loc[i * 3 + 1]!, this.loc[i * 3 + 2]!)
    if (slot === -1 || t.expireAt[slot]! <= now) return undefined
    return limit.kind.load(t.cells, slot * CELLS)
  }

  private write(i: number, limit: Check['limit'], s: Step<unknown>, now: number): void {
    const t = this.table
    const b = this.loc[i * 3]!
    const f1 = this.loc[i * 3 + 1]!
    const f2 = this.loc[i * 3 + 2]!
    let slot = t.find(b, f1, f2)
    if (slot === -1) slot = t.claim(b, f1, f2, now, this.onEvict)
    limit.kind.save(s.state, t.cells, slot * CELLS)
    t.expireAt[slot] = s.expireAt
  }
}
