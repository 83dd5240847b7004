/**
 * The counter table every worker thread shares: one SharedArrayBuffer of a
 * fixed size, set-associative (a key hashes to one bucket of WAYS slots and
 * lives in one of them), each slot holding a 64-bit key fingerprint, an
 * expiry and the CELLS doubles a limit kind packs its state into.
 *
 * Each bucket has a lock word taken with Atomics (lock.ts: spin, then Atomics.wait):
 * a caller locks every bucket it touches in ascending bucket order, so two
 * requests can never wait on each other in a cycle, and reads and writes of
 * the slots happen only under their bucket's lock (the lock's seq-cst
 * Atomics order the plain typed-array accesses between them).
 *
 * Keys are told apart by fingerprint only: two distinct keys share a slot
 * only if their 64-bit fingerprints are equal, about n²/2⁶⁵ for n keys
 * (3·10⁻⁸ for a million keys), in which case they share one counter.
 */
import { CELLS } from '../../algorithms/algorithm.js'
import { freeIfOwned, lockOwner, lockWord, unlockWord } from './lock.js'

/** Slots per bucket: a full bucket evicts its slot closest to expiry. */
const WAYS = 16
/** Bytes per slot: fingerprint (2 × int32), expiry (double), CELLS doubles; plus a lock word per bucket. */
export const SLOT_BYTES = 8 + 8 + CELLS * 8
const HEADER_BYTES = 64
// Header int32 words.
const H_BUCKETS = 0
const H_USED = 1
const H_SWEEP = 2
// Header bigint64 words (byte offset 16).
const B_EVICTIONS = 0
const B_EXPIRED = 1

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

  /** A new zeroed table of at most `maxBytes` bytes. */
  static create(maxBytes: number): SharedTable {
    const buckets = Math.floor((maxBytes - HEADER_BYTES) / (WAYS * SLOT_BYTES + 4))
    if (buckets < 1) throw new RangeError(`a shared table needs more than ${HEADER_BYTES + WAYS * SLOT_BYTES + 4} bytes`)
    const buffer = new SharedArrayBuffer(layout(buckets).total)
    new Int32Array(buffer, 0, 4)[H_BUCKETS] = buckets
    return new SharedTable(buffer, 0)
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
  }

  get bytes(): number {
    return this.buffer.byteLength
  }

  get used(): number {
    return Atomics.load(this.header, H_USED)
  }

  get evictions(): number {
    return Number(Atomics.load(this.counters, B_EVICTIONS))
  }

  get expired(): number {
    return Number(Atomics.load(this.counters, B_EXPIRED))
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

  /** The slot holding fingerprint (f1, f2) in `bucket`, or -1. Caller holds the bucket's lock. */
  find(bucket: number, f1: number, f2: number): number {
    const fp = this.fp
    const first = bucket * WAYS
    for (let s = first; s < first + WAYS; s++) {
      if (fp[s * 2] === f1 && fp[s * 2 + 1] === f2) return s
    }
    return -1
  }

  /**
   * A slot for a new fingerprint in `bucket`: an empty one, else one whose
   * state has expired by `now` (forgetting it is lossless), else the one that
   * expires first (an eviction: the least state lost). Caller holds the lock.
   */
  claim(bucket: number, f1: number, f2: number, now: number, onEvict: (() => void) | undefined): number {
    const fp = this.fp
    const exp = this.expireAt
    const first = bucket * WAYS
    let soonest = first
    let chosen = -1
    for (let s = first; s < first + WAYS; s++) {
      if (fp[s * 2] === 0 && fp[s * 2 + 1] === 0) {
        chosen = s
        Atomics.add(this.header, H_USED, 1)
        break
      }
      if (exp[s]! <= now) {
        chosen = s
        break
      }
      if (exp[s]! < exp[soonest]!) soonest = s
    }
    if (chosen === -1) {
      chosen = soonest
      Atomics.add(this.counters, B_EVICTIONS, 1n)
      onEvict?.()
    }
    fp[chosen * 2] = f1
    fp[chosen * 2 + 1] = f2
    return chosen
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

function layout(buckets: number): { locks: number; fp: number; expireAt: number; cells: number; total: number } {
  const slots = buckets * WAYS
  // Doubles first after the header (8-byte aligned), then the int32 arrays.
  const expireAt = HEADER_BYTES
  const cells = expireAt + slots * 8
  const fp = cells + slots * CELLS * 8
  const lockStart = fp + slots * 8
  return { locks: lockStart, fp, expireAt, cells, total: lockStart + buckets * 4 }
}

/**
 * The key's bucket and 64-bit fingerprint: two 32-bit multiplicative hashes
 * (FNV-1a and a murmur-style one, each with a final avalanche) over its
 * UTF-16 code units. Written into `out` to keep the hot path allocation-free.
 */
export function hashKey(key: string, buckets: number, out: Int32Array, i: number): void {
  let h1 = 0x811c9dc5
  let h2 = 0x9747b28c
  for (let j = 0; j < key.length; j++) {
    const c = key.charCodeAt(j)
    h1 = Math.imul(h1 ^ c, 0x01000193)
    h2 = Math.imul(h2 ^ c, 0x5bd1e995)
    h2 ^= h2 >>> 15
  }
  h1 = fmix(h1)
  h2 = fmix(h2 ^ key.length)
  if (h1 === 0 && h2 === 0) h2 = 1 // (0, 0) marks an empty slot
  out[i * 3] = (h1 >>> 0) % buckets
  out[i * 3 + 1] = h1
  out[i * 3 + 2] = h2
}

function fmix(h: number): number {
  h ^= h >>> 16
  h = Math.imul(h, 0x85ebca6b)
  h ^= h >>> 13
  h = Math.imul(h, 0xc2b2ae35)
  return h ^ (h >>> 16)
}
