/**
 * The memory store's counters: typed arrays indexed by slot (a Map only holds
 * key → slot; each kind packs its state into CELLS doubles), so a million
 * counters cost tens of bytes each instead of one JS object apiece, in a
 * doubly linked list in recency order, within a byte bound.
 *
 * Room for a new key comes only from counters that carry no information
 * (expired: a kind's `expireAt` is when forgetting its state is lossless),
 * looked for among the CANDIDATES least recently used; the live ones looked
 * at move to the warm end, so the next search looks at the next ones. A live
 * counter is never dropped for another key: add() then fails.
 *
 * Keys are the store's storedKey() forms, at most 185 characters: V8 hashes
 * Map keys with a random per-isolate seed (`--hash-seed=0`, the default,
 * means random, and `--rehash-snapshot` re-hashes the start-up snapshot's
 * strings with it: `node --v8-options`), but a string longer than
 * String::kMaxHashCalcLength (16,383) gets a hash made of its length alone
 * (deps/v8/src/strings/string-hasher-inl.h, GetTrivialHash): long keys of one
 * length would all collide in the Map (5,000 such keys took 20 s to insert
 * on Node 20).
 */
import { CELLS } from '../../algorithms/algorithm.js'

/** Bytes charged per counter on top of its key's length: slot arrays, Map entry, key string header. */
export const ENTRY_OVERHEAD_BYTES = 80
const NIL = -1
/** Least recently used counters looked at for one that carries no information, as many as a shared-table bucket holds. */
const CANDIDATES = 16
/** expireAt of a slot added during a call and not written yet: reads as no state, never taken for another key. */
export const RESERVED = -1

export class Counters {
  readonly index = new Map<string, number>()
  private keys: (string | undefined)[] = []
  /** CELLS doubles per slot: the kind's packed state. */
  cells: Float64Array
  expireAt: Float64Array
  private prev: Int32Array
  private next: Int32Array
  private head = NIL // most recently used
  private tail = NIL // least recently used
  private freeSlots: number[] = []
  private used = 0
  bytes = 0
  /** After add() failed: when the first of the live counters looked at expires. */
  soonest = 0

  constructor(
    readonly maxBytes: number,
    initialSlots: number,
  ) {
    this.cells = new Float64Array(initialSlots * CELLS)
    this.expireAt = new Float64Array(initialSlots)
    this.prev = new Int32Array(initialSlots)
    this.next = new Int32Array(initialSlots)
  }

  /** A slot for `key` (not held yet), its expiry RESERVED, at the warm end; -1 when there is no room without dropping a live counter. */
  add(key: string, now: number): number {
    const cost = ENTRY_OVERHEAD_BYTES + key.length
    if (!this.makeRoom(cost, now)) return -1
    const slot = this.allocate()
    this.keys[slot] = key
    this.index.set(key, slot)
    this.bytes += cost
    this.linkHead(slot)
    this.expireAt[slot] = RESERVED
    return slot
  }

  /** Mark `slot` as the most recently used. */
  touch(slot: number): void {
    if (slot === this.head) return
    this.unlink(slot)
    this.linkHead(slot)
  }

  /** Drop up to `maxScan` counters from the cold end that have expired by `now`. */
  sweep(now: number, maxScan: number): number {
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
    return dropped
  }

  remove(slot: number): void {
    const key = this.keys[slot]!
    this.index.delete(key)
    this.bytes -= ENTRY_OVERHEAD_BYTES + key.length
    this.keys[slot] = undefined
    this.unlink(slot)
    this.freeSlots.push(slot)
  }

  /**
   * Free `cost` bytes below the bound by dropping counters that carry no
   * information, looked for among the CANDIDATES least recently used; false
   * (and `soonest` set) when none of those can go.
   */
  private makeRoom(cost: number, now: number): boolean {
    while (this.bytes + cost > this.maxBytes) {
      let slot = this.tail
      let soonest = Infinity
      let looked = 0
      while (slot !== NIL && looked < CANDIDATES) {
        const exp = this.expireAt[slot]!
        if (exp <= now && exp !== RESERVED) break
        if (exp !== RESERVED) soonest = Math.min(soonest, exp)
        looked++
        slot = this.prev[slot]!
      }
      if (slot !== NIL && looked < CANDIDATES) {
        this.remove(slot)
        continue
      }
      // The live ones looked at go to the warm end: the next search starts past them.
      for (let k = 0; k < looked; k++) this.touch(this.tail)
      this.soonest = soonest
      return false
    }
    return true
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
