/**
 * In-process store, bounded like an nginx shared dict. Counter state lives in
 * typed arrays indexed by slot (a Map only holds key → slot; each kind packs
 * its state into CELLS doubles), so a million counters cost tens of bytes
 * each instead of one JS object apiece. Slots form
 * a doubly linked list in recency order: the least recently used bucket is
 * evicted when the byte bound is reached, and a periodic sweep from the cold
 * end drops buckets that would be full again (forgetting them is lossless).
 * Node runs JS on one thread, so a whole apply() is atomic by construction.
 */
import { CELLS, type Step } from '../../algorithms/algorithm.js'
import { earlierStaged, InProcessStore, stagedByKey } from '../in-process.js'
import type { Adjustment, Check, Outcomes } from '../store.js'

/** Bytes charged per bucket on top of its key's length: slot arrays, Map entry, key string header. */
export const ENTRY_OVERHEAD_BYTES = 80
const NIL = -1

export interface MemoryStoreOptions {
  /** Byte bound (FAIRVISOR_SHARED_DICT_SIZE). */
  maxBytes: number
  /** Initial slot capacity; grows by doubling. */
  initialSlots?: number
  /** Clock (epoch ms) for the idle sweep, which then runs every second; no sweep timer without it. */
  clock?: () => number
  /** Called on each eviction (a flood of new keys is pushing counters out; observe/ logs it, throttled). */
  onEvict?: () => void
}

export class MemoryStore extends InProcessStore {
  readonly maxBytes: number
  private readonly onEvict: (() => void) | undefined
  private readonly index = new Map<string, number>()
  private keys: (string | undefined)[] = []
  /** CELLS doubles per slot: the kind's packed state. */
  private cells: Float64Array
  private expireAt: Float64Array
  private prev: Int32Array
  private next: Int32Array
  private head = NIL // most recently used
  private tail = NIL // least recently used
  private freeSlots: number[] = []
  private used = 0
  private bytes = 0
  evictions = 0
  expired = 0

  constructor(opts: MemoryStoreOptions) {
    super(opts.clock)
    this.maxBytes = opts.maxBytes
    this.onEvict = opts.onEvict
    const n = opts.initialSlots ?? 1024
    this.cells = new Float64Array(n * CELLS)
    this.expireAt = new Float64Array(n)
    this.prev = new Int32Array(n)
    this.next = new Int32Array(n)
  }

  get size(): number {
    return this.index.size
  }

  get bytesUsed(): number {
    return this.bytes
  }

  fill(): { evictions: number; bytesUsed: number; maxBytes: number } {
    return { evictions: this.evictions, bytesUsed: this.bytes, maxBytes: this.maxBytes }
  }

  applyNow(checks: readonly Check[], now: number): Outcomes {
    if (checks.length === 1) return this.applyOne(checks[0]!, now)
    const out: Outcomes = new Array(checks.length)
    // Tentative new states, per check index; committed only if the group passes.
    const staged: (Step<unknown> | undefined)[] = new Array(checks.length)
    const byKey = stagedByKey(checks)
    let enforceRejected = false
    let shadowRejected = false
    for (let i = 0; i < checks.length; i++) {
      const c = checks[i]!
      if (c.shadow ? shadowRejected : enforceRejected) continue
      const earlier = earlierStaged(checks, staged, byKey, i)
      const r = c.limit.kind.step(earlier !== undefined ? earlier.state : this.stored(c.key, c.limit, now), c.limit, c.cost, now)
      out[i] = { allowed: r.allowed, value: r.value, retryAfter: r.retryAfter }
      if (r.allowed) {
        staged[i] = r
        byKey?.set(c.key, r)
      } else {
        if (r.commit) this.write(c, r)
        if (c.shadow) shadowRejected = true
        else enforceRejected = true
      }
    }
    for (let i = 0; i < checks.length; i++) {
      const s = staged[i]
      const c = checks[i]!
      if (s === undefined || (c.shadow ? shadowRejected : enforceRejected)) continue
      this.write(c, s)
    }
    return out
  }

  /** The usual request: one check, its own group. One index lookup serves the read and the write. */
  private applyOne(c: Check, now: number): Outcomes {
    const kind = c.limit.kind
    const slot = this.index.get(c.key)
    const live = slot !== undefined && this.expireAt[slot]! > now
    const r = kind.step(live ? kind.load(this.cells, slot * CELLS) : undefined, c.limit, c.cost, now)
    if (r.allowed || r.commit) this.writeAt(c, r, slot)
    return [{ allowed: r.allowed, value: r.value, retryAfter: r.retryAfter }]
  }

  adjust(adjustments: readonly Adjustment[], now: number, done: (err: Error | null) => void): void {
    for (const a of adjustments) {
      const r = a.limit.kind.adjust(this.stored(a.key, a.limit, now), a.limit, a.amount, now)
      if (r !== undefined) this.write(a, r)
    }
    done(null)
  }

  private stored(key: string, limit: Check['limit'], now: number): unknown {
    const slot = this.index.get(key)
    if (slot === undefined || this.expireAt[slot]! <= now) return undefined
    return limit.kind.load(this.cells, slot * CELLS)
  }

  private write(c: { key: string; limit: Check['limit'] }, s: Step<unknown>): void {
    this.writeAt(c, s, this.index.get(c.key))
  }

  /** write(), with the key's slot already looked up (undefined: the key has none yet). */
  private writeAt(c: { key: string; limit: Check['limit'] }, s: Step<unknown>, found: number | undefined): void {
    const key = c.key
    let slot = found
    if (slot === undefined) {
      const cost = ENTRY_OVERHEAD_BYTES + key.length
      while (this.bytes + cost > this.maxBytes && this.tail !== NIL) {
        this.remove(this.tail)
        this.evictions++
        this.onEvict?.()
      }
      slot = this.allocate()
      this.keys[slot] = key
      this.index.set(key, slot)
      this.bytes += cost
      this.linkHead(slot)
    } else if (slot !== this.head) {
      this.unlink(slot)
      this.linkHead(slot)
    }
    c.limit.kind.save(s.state, this.cells, slot * CELLS)
    this.expireAt[slot] = s.expireAt
  }

  protected sweepExpired(now: number): void {
    this.sweep(now)
  }

  /** Drop up to `maxScan` buckets from the cold end that are full again by `now`. */
  sweep(now: number, maxScan = 10_000): number {
    let slot = this.tail
    let dropped = 0
    for (let n = 0; n < maxScan && slot !== NIL; n++) {
      const before = this.prev[slot]!
      if (this.expireAt[slot]! <= now) {
        this.remove(slot)
        dropped++
      }
      slot = before
    }
    this.expired += dropped
    return dropped
  }

  private allocate(): number {
    const free = this.freeSlots.pop()
    if (free !== undefined) return free
    if (this.used === this.expireAt.length) this.grow()
    return this.used++
  }

  private grow(): void {
    const n = this.expireAt.length * 2
    const widen = <T extends Float64Array | Int32Array>(a: T, per = 1): T => {
      const b = new (a.constructor as new (n: number) => T)(n * per)
      b.set(a)
      return b
    }
    this.cells = widen(this.cells, CELLS)
    this.expireAt = widen(this.expireAt)
    this.prev = widen(this.prev)
    this.next = widen(this.next)
  }

  private remove(slot: number): void {
    const key = this.keys[slot]!
    this.index.delete(key)
    this.bytes -= ENTRY_OVERHEAD_BYTES + key.length
    this.keys[slot] = undefined
    this.unlink(slot)
    this.freeSlots.push(slot)
  }

  private linkHead(slot: number): void {
    this.prev[slot] = NIL
    this.next[slot] = this.head
    if (this.head !== NIL) this.prev[this.head] = slot
    this.head = slot
    if (this.tail === NIL) this.tail = slot
  }

  private unlink(slot: number): void {
    const p = this.prev[slot]!
    const n = this.next[slot]!
    if (p !== NIL) this.next[p] = n
    else this.head = n
    if (n !== NIL) this.prev[n] = p
    else this.tail = p
  }
}
