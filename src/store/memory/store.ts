/**
 * In-process store, bounded like an nginx shared dict (its counters, their
 * byte bound and the room rule are in counters.ts). A periodic sweep from
 * the cold end drops counters that have expired (forgetting them is
 * lossless); a new key whose counter finds no room is refused (`full`, see
 * in-process.ts). Node runs JS on one thread, so a whole apply() is atomic
 * by construction.
 */
import { CELLS, type Step } from '../../algorithms/algorithm.js'
import { fullRetryAfter, InProcessStore, readOf } from '../in-process.js'
import type { Adjustment, Check, Outcome, Outcomes, StoreFill } from '../store.js'
import { storedKey } from '../stored-key.js'
import { Counters, RESERVED } from './counters.js'

export { ENTRY_OVERHEAD_BYTES } from './counters.js'

export interface MemoryStoreOptions {
  /** Byte bound (FAIRVISOR_SHARED_DICT_SIZE). */
  maxBytes: number
  /** Initial slot capacity; grows by doubling. */
  initialSlots?: number
  /** Clock (epoch ms) for the idle sweep, which then runs every second; no sweep timer without it. */
  clock?: () => number
  /** Called on each check refused for want of room (a flood of new keys?; observe/ logs it, throttled). */
  onFull?: () => void
}

export class MemoryStore extends InProcessStore {
  readonly maxBytes: number
  private readonly onFull: (() => void) | undefined
  private readonly counters: Counters
  /** Slots added by the current call (dropped at its end if not written). */
  private reserved: number[] = []
  /** Checks refused for want of room. */
  full = 0
  expired = 0

  constructor(opts: MemoryStoreOptions) {
    super(opts.clock)
    this.maxBytes = opts.maxBytes
    this.onFull = opts.onFull
    this.counters = new Counters(opts.maxBytes, opts.initialSlots ?? 1024)
  }

  get size(): number {
    return this.counters.index.size
  }

  get bytesUsed(): number {
    return this.counters.bytes
  }

  /** Whether `key` holds a counter, expired or not (tests). */
  has(key: string): boolean {
    return this.counters.index.has(storedKey(key))
  }

  fill(): StoreFill {
    return { full: this.full, bytesUsed: this.counters.bytes, maxBytes: this.maxBytes }
  }

  applyNow(checks: readonly Check[], now: number, reads?: Outcomes): Outcomes {
    if (checks.length === 1 && (reads === undefined || checks[0]!.onReject === undefined)) return this.applyOne(checks[0]!, now)
    const out = this.evaluateGroups(checks, checks.length, now, reads)
    // Slots added for checks whose group was not committed.
    for (const slot of this.reserved) if (this.counters.expireAt[slot] === RESERVED) this.counters.remove(slot)
    this.reserved.length = 0
    return out
  }

  protected storedState(checks: readonly Check[], i: number, now: number): unknown {
    const c = checks[i]!
    return this.stored(c.key, c.limit, now)
  }

  protected hasRoom(checks: readonly Check[], i: number, s: Step<unknown>, now: number): boolean {
    return this.slotFor(storedKey(checks[i]!.key), s, now) !== -1
  }

  protected soonestExpiry(): number {
    return this.counters.soonest
  }

  protected writeState(checks: readonly Check[], i: number, s: Step<unknown>): void {
    this.write(checks[i]!, s)
  }

  /** The usual request: one check, its own group. One index lookup serves the read and the write. */
  private applyOne(c: Check, now: number): Outcomes {
    const kind = c.limit.kind
    const key = storedKey(c.key)
    const t = this.counters
    let slot = t.index.get(key)
    const live = slot !== undefined && t.expireAt[slot]! > now
    const r = kind.step(live ? kind.load(t.cells, slot! * CELLS) : undefined, c.limit, c.cost, now)
    if (r.allowed || r.commit) {
      if (slot === undefined) slot = this.slotFor(key, r, now)
      if (slot === -1) return [{ allowed: false, value: 0, retryAfter: fullRetryAfter(t.soonest, now), full: true }]
      if (slot >= 0) this.writeAt(slot, c.limit, r)
      this.reserved.length = 0 // written (or nothing to keep)
    }
    return [{ allowed: r.allowed, value: r.value, retryAfter: r.retryAfter }]
  }

  adjust(adjustments: readonly Adjustment[], now: number, done: (err: Error | null) => void): void {
    for (const a of adjustments) {
      const r = a.limit.kind.adjust(this.stored(a.key, a.limit, now), a.limit, a.amount, now)
      // No room for a new counter: the adjustment is dropped (counted), never made room for.
      if (r !== undefined && this.slotFor(storedKey(a.key), r, now) !== -1) this.write(a, r)
    }
    this.reserved.length = 0
    done(null)
  }

  peek(check: Check, now: number): Outcome {
    return readOf(check, this.stored(check.key, check.limit, now), now)
  }

  reset(keys: readonly string[], done: (err: Error | null) => void): void {
    for (const key of keys) {
      const slot = this.counters.index.get(storedKey(key))
      if (slot !== undefined) this.counters.remove(slot)
    }
    done(null)
  }

  private stored(key: string, limit: Check['limit'], now: number): unknown {
    const slot = this.counters.index.get(storedKey(key))
    // A RESERVED slot (added earlier in this call, not written) reads as no state.
    if (slot === undefined || this.counters.expireAt[slot]! <= now) return undefined
    return limit.kind.load(this.counters.cells, slot * CELLS)
  }

  /** Write a state to its key's slot (slotFor() found or added it; none: the state carries nothing to keep). */
  private write(c: { key: string; limit: Check['limit'] }, s: Step<unknown>): void {
    const slot = this.counters.index.get(storedKey(c.key))
    if (slot !== undefined) this.writeAt(slot, c.limit, s)
  }

  private writeAt(slot: number, limit: Check['limit'], s: Step<unknown>): void {
    const t = this.counters
    t.touch(slot)
    limit.kind.save(s.state, t.cells, slot * CELLS)
    // A state that carries nothing must still not read as RESERVED (the end of the call would drop it).
    t.expireAt[slot] = s.expireAt === RESERVED ? 0 : s.expireAt
  }

  /**
   * The slot `key`'s new state `s` goes to: its own, else a new one (dropped
   * at the end of the call if not written); -2 when the state carries no
   * information (nothing to keep); -1 when there is no room without
   * dropping a live counter (counted).
   */
  private slotFor(key: string, s: Step<unknown>, now: number): number {
    const t = this.counters
    const found = t.index.get(key)
    if (found !== undefined) {
      // The key's own expired counter: reserved like a new one, or another key of this call could take its room.
      if (t.expireAt[found]! <= now && t.expireAt[found] !== RESERVED) {
        t.expireAt[found] = RESERVED
        this.reserved.push(found)
      }
      return found
    }
    if (s.expireAt <= now) return -2
    const slot = this.counters.add(key, now)
    if (slot === -1) {
      this.full++
      this.onFull?.()
    } else this.reserved.push(slot)
    return slot
  }

  protected sweepExpired(now: number): void {
    this.sweep(now)
  }

  /** Drop up to `maxScan` counters from the cold end that have expired by `now`. */
  sweep(now: number, maxScan = 10_000): number {
    const dropped = this.counters.sweep(now, maxScan)
    this.expired += dropped
    return dropped
  }
}
