/**
 * In-process store, bounded like an nginx shared dict. Bucket state lives in
 * typed arrays indexed by slot (a Map only holds key → slot), so a million
 * buckets cost tens of bytes each instead of one JS object apiece. Slots form
 * a doubly linked list in recency order: the least recently used bucket is
 * evicted when the byte bound is reached, and a periodic sweep from the cold
 * end drops buckets that would be full again (forgetting them is lossless).
 * Node runs JS on one thread, so a whole apply() is atomic by construction.
 */
import { takeTokens, secondsUntilFull, type BucketState } from '../algorithms/token-bucket.js'
import type { Check, Outcomes, Store, StoreHealth } from './store.js'

/** Bytes charged per bucket on top of its key's length: slot arrays, Map entry, key string header. */
export const ENTRY_OVERHEAD_BYTES = 80
const NIL = -1

export interface MemoryStoreOptions {
  /** Byte bound (FAIRVISOR_SHARED_DICT_SIZE). */
  maxBytes: number
  /** Initial slot capacity; grows by doubling. */
  initialSlots?: number
}

export class MemoryStore implements Store {
  readonly kind = 'memory'
  private readonly maxBytes: number
  private readonly index = new Map<string, number>()
  private keys: (string | undefined)[] = []
  private tokens: Float64Array
  private last: Float64Array
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
    this.maxBytes = opts.maxBytes
    const n = opts.initialSlots ?? 1024
    this.tokens = new Float64Array(n)
    this.last = new Float64Array(n)
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

  health(): StoreHealth {
    return { state: 'ok', ready: true }
  }

  async close(): Promise<void> {}

  apply(checks: readonly Check[], now: number): Outcomes {
    const out: Outcomes = new Array(checks.length)
    // Tentative new states, per check index; committed only if the group passes.
    const staged: (BucketState | undefined)[] = new Array(checks.length)
    let enforceRejected = false
    let shadowRejected = false
    for (let i = 0; i < checks.length; i++) {
      const c = checks[i]!
      if (c.shadow ? shadowRejected : enforceRejected) continue
      const r = takeTokens(this.current(checks, staged, i, now), c, c.cost, now)
      out[i] = { allowed: r.allowed, tokens: r.tokens, retryAfter: r.retryAfter }
      if (r.allowed) staged[i] = { tokens: r.tokens, last: r.last }
      else if (c.shadow) shadowRejected = true
      else enforceRejected = true
    }
    for (let i = 0; i < checks.length; i++) {
      const s = staged[i]
      const c = checks[i]!
      if (s === undefined || (c.shadow ? shadowRejected : enforceRejected)) continue
      this.write(c.key, s, s.last + secondsUntilFull(s.tokens, c))
    }
    return out
  }

  /** State seen by check i: a staged state of the same key earlier in this call, else the stored one. */
  private current(checks: readonly Check[], staged: (BucketState | undefined)[], i: number, now: number): BucketState | undefined {
    const c = checks[i]!
    for (let j = i - 1; j >= 0; j--) {
      if (staged[j] !== undefined && checks[j]!.key === c.key) return staged[j]
    }
    const slot = this.index.get(c.key)
    if (slot === undefined || this.expireAt[slot]! <= now) return undefined
    return { tokens: this.tokens[slot]!, last: this.last[slot]! }
  }

  private write(key: string, s: BucketState, expireAt: number): void {
    let slot = this.index.get(key)
    if (slot === undefined) {
      const cost = ENTRY_OVERHEAD_BYTES + key.length
      while (this.bytes + cost > this.maxBytes && this.tail !== NIL) {
        this.remove(this.tail)
        this.evictions++
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
    this.tokens[slot] = s.tokens
    this.last[slot] = s.last
    this.expireAt[slot] = expireAt
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
    if (this.used === this.tokens.length) this.grow()
    return this.used++
  }

  private grow(): void {
    const n = this.tokens.length * 2
    const widen = <T extends Float64Array | Int32Array>(a: T): T => {
      const b = new (a.constructor as new (n: number) => T)(n)
      b.set(a)
      return b
    }
    this.tokens = widen(this.tokens)
    this.last = widen(this.last)
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
