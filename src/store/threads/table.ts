/**
 * The counter table every worker thread shares: one SharedArrayBuffer of a
 * fixed size (its layout: table-layout.ts), set-associative (WAYS slots per
 * bucket), each slot holding a 64-bit key fingerprint, an expiry and the
 * CELLS doubles a limit kind packs its state into.
 *
 * A key's place is SipHash-1-3 (siphash.ts) of the key under a random seed
 * drawn when the table is made and kept in its header: every thread of the
 * process hashes alike, nobody outside it can compute keys that share a
 * bucket. The hash names two buckets and a new key goes to the one holding
 * fewer live counters ("two choices"), so buckets fill evenly.
 *
 * Room for a new key comes only from slots that carry no information: empty,
 * or expired (a kind's `expireAt` is when forgetting its state is lossless).
 * A live counter is never dropped for another key: when both buckets hold
 * only live ones, claim() finds no slot and the store refuses the check.
 *
 * Each bucket has a lock word taken with Atomics (lock.ts: spin, then Atomics.wait):
 * a caller locks every bucket it touches in ascending bucket order, so two
 * requests can never wait on each other in a cycle, and reads and writes of
 * the slots happen only under their bucket's lock (the lock's seq-cst
 * Atomics order the plain typed-array accesses between them).
 *
 * Keys are told apart by their 64-bit hash only: two distinct keys share a
 * counter only if it collides, about n²/2⁶⁵ for n keys (3·10⁻⁸ for a million).
 */
import { randomBytes } from 'node:crypto'
import { CELLS } from '../../algorithms/algorithm.js'
import type { StoreFill } from '../store.js'
import { freeIfOwned, lockOwner, lockWord, unlockWord } from './lock.js'
import { sipHash, sipKey } from './siphash.js'
import * as Layout from './table-layout.js'

export { SLOT_BYTES } from './table-layout.js'

// Module-local copies: V8 folds a module's own constants into the hot scans, not imported bindings
// (a 16-slot scan took 13 ns with a local constant, 20 ns with an imported one, Node 20).
const { B_EXPIRED, B_FULL, H_BUCKETS, H_SWEEP, H_USED, layout, SEED_AT, SLOT_BYTES, tableBuffer, WAYS } = Layout
/** Expiry of a slot claimed and not written yet: no state, not free either; only its claimer (holding the lock) sees it. */
export const RESERVED = -1

export class SharedTable {
  readonly buffer: SharedArrayBuffer
  readonly buckets: number
  readonly slots: number
  private readonly header: Int32Array
  private readonly counters: BigInt64Array
  private readonly locks: Int32Array
  /** Two int32 per slot; both 0: empty. */
  readonly fp: Int32Array
  readonly expireAt: Float64Array
  readonly cells: Float64Array
  /** This thread's lock word value. */
  private readonly me: number
  /** The SipHash key, read once from the header. */
  private readonly seed: Int32Array
  /** After a claim() that found no slot: the soonest expiry among the counters that filled both buckets. */
  soonest = 0

  /** A new zeroed table of at most `maxBytes` bytes; `seed` (16 bytes) for tests, else random. */
  static create(maxBytes: number, seed: Uint8Array = randomBytes(16)): SharedTable {
    return new SharedTable(tableBuffer(maxBytes, seed), 0)
  }

  /** The table behind `buffer` (created by create() in another thread), used by thread `threadId`. */
  constructor(buffer: SharedArrayBuffer, threadId: number) {
    this.buffer = buffer
    this.header = new Int32Array(buffer, 0, 4)
    this.counters = new BigInt64Array(buffer, 16, 2)
    this.buckets = this.header[H_BUCKETS]!
    this.slots = this.buckets * WAYS
    const l = layout(this.buckets)
    this.locks = new Int32Array(buffer, l.locks, this.buckets)
    this.fp = new Int32Array(buffer, l.fp, this.slots * 2)
    this.expireAt = new Float64Array(buffer, l.expireAt, this.slots)
    this.cells = new Float64Array(buffer, l.cells, this.slots * CELLS)
    this.me = lockOwner(threadId)
    this.seed = sipKey(new Uint8Array(buffer, SEED_AT, 16).slice())
  }

  get bytes(): number {
    return this.buffer.byteLength
  }

  get used(): number {
    return Atomics.load(this.header, H_USED)
  }

  /** Checks refused because both buckets of their key held only live counters (every thread's). */
  get full(): number {
    return Number(Atomics.load(this.counters, B_FULL))
  }

  /** The table's fill for the metrics: every thread's refusals, the bytes of the slots in use, the table's size. */
  fill(): StoreFill {
    return { full: this.full, bytesUsed: this.used * SLOT_BYTES, maxBytes: this.bytes }
  }

  get expired(): number {
    return Number(Atomics.load(this.counters, B_EXPIRED))
  }

  /**
   * Where `key` goes: its two candidate buckets and its 64-bit fingerprint,
   * written to out[i * 4 …] (bucket, other bucket, fingerprint high, low).
   * Allocation-free: the hot path hashes every key of every request.
   */
  locate(key: string, out: Int32Array, i: number): void {
    const at = i * 4
    sipHash(this.seed, key, true, 1, 3, out, at + 2)
    const h = out[at + 2]!
    const l = out[at + 3]!
    if (h === 0 && l === 0) out[at + 3] = 1 // (0, 0) marks an empty slot
    out[at] = (l >>> 0) % this.buckets
    out[at + 1] = (h >>> 0) % this.buckets
  }

  lock(bucket: number): void {
    lockWord(this.locks, bucket, this.me)
  }

  unlock(bucket: number): void {
    unlockWord(this.locks, bucket)
  }

  /**
   * Free every lock held by thread `threadId` (it died, possibly inside a
   * critical section): its waiters go on. The counters it was writing keep
   * whatever it had written.
   */
  releaseLocksOf(threadId: number): number {
    const owner = lockOwner(threadId)
    let n = 0
    for (let b = 0; b < this.buckets; b++) if (freeIfOwned(this.locks, b, owner)) n++
    return n
  }

  /** The slot holding fingerprint (f1, f2) in bucket `b1` or `b2`, or -1. Caller holds both locks. */
  find(b1: number, b2: number, f1: number, f2: number): number {
    const s = this.findIn(b1, f1, f2)
    return s !== -1 || b2 === b1 ? s : this.findIn(b2, f1, f2)
  }

  private findIn(bucket: number, f1: number, f2: number): number {
    const fp = this.fp
    const first = bucket * WAYS
    for (let s = first; s < first + WAYS; s++) {
      if (fp[s * 2] === f1 && fp[s * 2 + 1] === f2) return s
    }
    return -1
  }

  /**
   * A slot for a new fingerprint (in neither bucket: find() said so), its
   * expiry set to RESERVED: an empty or expired slot, in the bucket holding
   * fewer counters first. -1 when both hold only live counters (counted in
   * `full`; `soonest` says when the first of them expires). Caller holds
   * both locks. Fewest reads first: find() has just read both buckets'
   * fingerprints, their expiries are read only when no slot is empty.
   */
  claim(b1: number, b2: number, f1: number, f2: number, now: number): number {
    const first = b2 === b1 || this.occupied(b1) <= this.occupied(b2) ? b1 : b2
    let slot = this.freeSlot(first, now)
    if (slot === -1 && b2 !== b1) slot = this.freeSlot(first === b1 ? b2 : b1, now)
    if (slot === -1) {
      this.soonest = Math.min(this.firstExpiry(b1), this.firstExpiry(b2))
      Atomics.add(this.counters, B_FULL, 1n)
      return -1
    }
    if (this.fp[slot * 2] === 0 && this.fp[slot * 2 + 1] === 0) Atomics.add(this.header, H_USED, 1)
    this.fp[slot * 2] = f1
    this.fp[slot * 2 + 1] = f2
    this.expireAt[slot] = RESERVED
    return slot
  }

  /** Give back a slot claim() returned whose state was never written (its check did not commit). Caller holds the lock. */
  release(slot: number): void {
    if (this.expireAt[slot] !== RESERVED) return
    this.fp[slot * 2] = 0
    this.fp[slot * 2 + 1] = 0
    this.expireAt[slot] = 0
    Atomics.sub(this.header, H_USED, 1)
  }

  /** Empty `slot` whatever it holds (the admin API's reset: its key's next check starts afresh). Caller holds the lock. */
  forget(slot: number): void {
    if (this.fp[slot * 2] === 0 && this.fp[slot * 2 + 1] === 0) return
    this.fp[slot * 2] = 0
    this.fp[slot * 2 + 1] = 0
    this.expireAt[slot] = 0
    Atomics.sub(this.header, H_USED, 1)
  }

  private occupied(bucket: number): number {
    let n = 0
    for (let s = bucket * WAYS; s < (bucket + 1) * WAYS; s++) if (this.fp[s * 2] !== 0 || this.fp[s * 2 + 1] !== 0) n++
    return n
  }

  /** An empty slot of `bucket`, else one whose counter has expired by `now` (not one claimed by this call), else -1. */
  private freeSlot(bucket: number, now: number): number {
    const fp = this.fp
    for (let s = bucket * WAYS; s < (bucket + 1) * WAYS; s++) if (fp[s * 2] === 0 && fp[s * 2 + 1] === 0) return s
    const exp = this.expireAt
    for (let s = bucket * WAYS; s < (bucket + 1) * WAYS; s++) if (exp[s]! <= now && exp[s] !== RESERVED) return s
    return -1
  }

  private firstExpiry(bucket: number): number {
    let t = Infinity
    for (let s = bucket * WAYS; s < (bucket + 1) * WAYS; s++) if (this.expireAt[s] !== RESERVED) t = Math.min(t, this.expireAt[s]!)
    return t
  }

  /**
   * Empty the expired slots of the next `count` buckets (a cursor shared by
   * all threads walks the table, so the total work does not grow with the
   * number of workers). Returns the slots emptied.
   */
  sweep(now: number, count: number): number {
    const n = Math.min(count, this.buckets)
    const start = Atomics.add(this.header, H_SWEEP, n) % this.buckets
    let emptied = 0
    for (let i = 0; i < n; i++) {
      const b = (start + i) % this.buckets
      this.lock(b)
      for (let s = b * WAYS; s < (b + 1) * WAYS; s++) {
        if ((this.fp[s * 2] !== 0 || this.fp[s * 2 + 1] !== 0) && this.expireAt[s]! <= now) {
          this.fp[s * 2] = 0
          this.fp[s * 2 + 1] = 0
          emptied++
        }
      }
      this.unlock(b)
    }
    if (emptied > 0) {
      Atomics.sub(this.header, H_USED, emptied)
      Atomics.add(this.counters, B_EXPIRED, BigInt(emptied))
    }
    return emptied
  }
}
