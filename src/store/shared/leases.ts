/**
 * The lease table of one gateway process (store/leasing.ts): which hot keys
 * hold a slice of their shared bucket here, and how much of it is unspent.
 * It lives in a SharedArrayBuffer, made by the supervisor when there are
 * worker threads, so every worker spends from the same slice: one slice per
 * key per process, not per worker, and one fetch per key per process at a
 * time. With one thread it is the same table, just not handed to anyone.
 *
 * Set-associative like the counter table (table.ts): a key hashes to a group
 * of WAYS cells, each group has a lock word (lock.ts) and a generation word.
 * The hash is SipHash-1-3 under a random seed kept in the table's header (the
 * same for every thread of the process, unknown outside it), so nobody can
 * compute keys that share a group. A full group never drops a live cell: the
 * key is decided exactly instead.
 * Every read and write of a cell happens under its group's lock, so each
 * transition below is atomic across threads:
 *
 *   empty ─take→ fetching ─open→ lease ─(spent / expired / other limit)→ fetching | empty
 *                   ├─release→ exact (a slice did not fit, for ttl_ms) | empty
 *                   └─(its thread died: releaseOf; or FETCH_BOUND_MS passed)→ empty | another's fetching
 *
 * Unspent tokens leave a cell only under its lock, and the cell is zeroed
 * in the same critical section, so they are handed back (returns) by exactly
 * one thread, whichever ends the lease: the opener's expiry timer, another
 * worker finding it expired, a sweep, or the last close. Waiting for another
 * thread's fetch is Atomics.waitAsync on the group's generation, which every
 * open / release bumps and notifies.
 *
 * A cell keeps its key's text (for the give-back call), so keys longer than
 * KEY_UNITS UTF-16 units are not leased (decided exactly); neither is a key
 * whose group is full (4 live leases, fetches or exact modes of other keys):
 * take() counts those in `full` (fairvisor_lease_table_full_total). Both are
 * safe: exact is what leases save.
 */
import { EPSILON } from '../../algorithms/algorithm.js'
import { bucketLimit, type BucketLimit, type LeaseConfig } from '../../algorithms/token-bucket.js'
import type { Adjustment } from '../store.js'
import { randomBytes } from 'node:crypto'
import { freeIfOwned, lockOwner, lockWord, ownerThread, unlockWord } from './lock.js'
import { sipHash, sipKey } from './siphash.js'

const WAYS = 4
/** Header: groups and cells used (int32 each), then the 16-byte hash seed. */
const HEADER_BYTES = 24
/** Longest key a cell holds. */
export const KEY_UNITS = 120
/** Cells per process by default (FAIRVISOR_LEASE_TABLE_KEYS): hot keys are few; ~2.6 MB. */
export const DEFAULT_CELLS = 8192
/**
 * A fetch this old is abandoned: every store call ends by its deadline
 * (FAIRVISOR_STORE_TIMEOUT_MS, at most 60 s), so its thread died without the
 * supervisor freeing it, or is stalled. Another thread may then fetch the key,
 * and the sweep frees the cell. Safe: the late open() of the old fetch finds
 * the cell not its own and gives its slice straight back.
 */
export const FETCH_BOUND_MS = 120_000
/** Bounds of FAIRVISOR_LEASE_TABLE_KEYS: a few groups at least; at most ~340 MB (322 bytes a cell: it holds its key's text). */
export const MIN_CELLS = 16
export const MAX_CELLS = 1_048_576

// Cell states.
const EMPTY = 0
const FETCHING = 1
const LEASE = 2
const EXACT = 3
// Int32 fields per cell.
const FP1 = 0
const FP2 = 1
const STATE = 2
const OWNER = 3
const SERIAL = 4
const KEYLEN = 5
const INTS = 6
// Float64 fields per cell.
const TOKENS = 0
const LEFT = 1
/** Lease expiry, or the end of exact mode (epoch ms). */
const UNTIL = 2
const RATE = 3
const BURST = 4
const SLICE = 5
const TTL = 6
const DOUBLES = 7

/** What take() decided. */
export const SPENT = 0
export const WAIT = 1
export const FETCH = 2
export const DECIDE_EXACT = 3
export type Taken = typeof SPENT | typeof WAIT | typeof FETCH | typeof DECIDE_EXACT

/** A leased token-bucket limit and its lease (a cell compares rate, burst, slice and ttl to tell a changed limit). */
type Leased = Pick<BucketLimit, 'rate' | 'burst'>

export class LeaseTable {
  readonly buffer: SharedArrayBuffer
  readonly groups: number
  /** Group generation words: Atomics.waitAsync on them (leasing.ts waits for another fetch). */
  readonly gens: Int32Array
  private readonly header: Int32Array
  private readonly locks: Int32Array
  private readonly ints: Int32Array
  private readonly dbl: Float64Array
  private readonly keys: Uint16Array
  private readonly me: number
  /** The SipHash key, read once from the header. */
  private readonly seed: Int32Array
  /** The located key's hash: high, low (its fingerprint; the low half names its group). */
  private readonly loc = new Int32Array(2)
  /** Set by take(): the figure of a SPENT (tokens the bucket would show), the generation to wait on after a WAIT. */
  value = 0
  group = 0
  gen = 0
  /** Unspent tokens taken out of ended leases, for the caller to give back to the shared store (then cleared). */
  returns: Adjustment[] = []
  /** take()s of this thread decided exactly because the key's group had no cell to spare (the table is too small for the hot keys). */
  full = 0

  /** A table of `cells` cells, rounded up to whole groups of WAYS; `seed` (16 bytes) for tests, else random. */
  static create(cells = DEFAULT_CELLS, seed: Uint8Array = randomBytes(16)): LeaseTable {
    const groups = Math.max(1, Math.ceil(cells / WAYS))
    sipKey(seed) // checks its length
    const buffer = new SharedArrayBuffer(layout(groups).total)
    new Int32Array(buffer, 0, 2)[0] = groups
    new Uint8Array(buffer, 8, 16).set(seed)
    return new LeaseTable(buffer, 0)
  }

  /** The table behind `buffer` (made by create(), maybe in another thread), used by thread `threadId`. */
  constructor(buffer: SharedArrayBuffer, threadId: number) {
    this.buffer = buffer
    this.header = new Int32Array(buffer, 0, 2)
    this.groups = this.header[0]!
    const l = layout(this.groups)
    const cells = this.groups * WAYS
    this.dbl = new Float64Array(buffer, l.dbl, cells * DOUBLES)
    this.ints = new Int32Array(buffer, l.ints, cells * INTS)
    this.locks = new Int32Array(buffer, l.locks, this.groups)
    this.gens = new Int32Array(buffer, l.gens, this.groups)
    this.keys = new Uint16Array(buffer, l.keys, cells * KEY_UNITS)
    this.me = lockOwner(threadId)
    this.seed = sipKey(new Uint8Array(buffer, 8, 16).slice())
  }

  /** Cells in use (leases, fetches, exact-mode keys) in the whole process. */
  get used(): number {
    return Atomics.load(this.header, 1)
  }

  get cells(): number {
    return this.groups * WAYS
  }

  /** The id of the thread fetching `key` now, or undefined (the supervisor's tests kill that thread mid-fetch). */
  fetching(key: string): number | undefined {
    if (key.length > KEY_UNITS) return undefined
    const g = this.locate(key)
    lockWord(this.locks, g, this.me)
    const c = this.find(g)
    const owner = c !== -1 && this.ints[c * INTS + STATE] === FETCHING ? this.ints[c * INTS + OWNER]! : 0
    unlockWord(this.locks, g)
    return owner === 0 ? undefined : ownerThread(owner)
  }

  /** Spend `cost` from `key`'s lease, or say what to do instead; `now` in epoch ms. */
  take(key: string, lim: Leased, cfg: LeaseConfig, cost: number, now: number): Taken {
    if (cost >= cfg.tokens || key.length > KEY_UNITS) return DECIDE_EXACT
    const g = this.locate(key)
    const d = this.dbl
    const n = this.ints
    lockWord(this.locks, g, this.me)
    let c = this.find(g)
    if (c !== -1) {
      const st = n[c * INTS + STATE]!
      const o = c * DOUBLES
      if (st === LEASE && d[o + UNTIL]! > now && this.sameLimit(o, lim, cfg)) {
        if (d[o + TOKENS]! + EPSILON >= cost) {
          d[o + TOKENS] = d[o + TOKENS]! - cost
          this.value = d[o + LEFT]! + d[o + TOKENS]!
          unlockWord(this.locks, g)
          return SPENT
        }
      } else if (st === FETCHING && d[o + UNTIL]! > now) {
        this.group = g
        this.gen = Atomics.load(this.gens, g)
        unlockWord(this.locks, g)
        return WAIT
      } else if (st === EXACT && d[o + UNTIL]! > now) {
        unlockWord(this.locks, g)
        return DECIDE_EXACT
      }
      // A spent, expired or outdated lease (its rest goes back), or an exact mode that ended: fetch anew.
      if (st === LEASE) this.takeOut(c)
    } else {
      c = this.claim(g, now)
      if (c === -1) {
        unlockWord(this.locks, g)
        this.full++
        return DECIDE_EXACT
      }
    }
    n[c * INTS + STATE] = FETCHING
    n[c * INTS + OWNER] = this.me
    d[c * DOUBLES + UNTIL] = now + FETCH_BOUND_MS
    unlockWord(this.locks, g)
    return FETCH
  }

  /** This thread's fetch of `key` brought a slice: `tokens` unspent, `left` in the shared bucket. Returns the lease's cell and serial (for end()), or -1 when none was open. */
  open(
    key: string,
    lim: Leased,
    cfg: LeaseConfig,
    tokens: number,
    left: number,
    now: number,
  ): { cell: number; serial: number } | undefined {
    const g = this.locate(key)
    lockWord(this.locks, g, this.me)
    const c = this.fetchOf(g)
    let out: { cell: number; serial: number } | undefined
    if (c === -1) {
      // Not ours any more (the supervisor freed it): the slice goes straight back.
      this.returns.push({ key, limit: bucketLimit(lim.rate, lim.burst), amount: tokens })
    } else {
      const n = this.ints
      const o = c * DOUBLES
      n[c * INTS + STATE] = LEASE
      const serial = (n[c * INTS + SERIAL]! + 1) | 0
      n[c * INTS + SERIAL] = serial
      n[c * INTS + KEYLEN] = key.length
      for (let i = 0; i < key.length; i++) this.keys[c * KEY_UNITS + i] = key.charCodeAt(i)
      this.dbl.set([tokens, left, now + cfg.ttlMs, lim.rate, lim.burst, cfg.tokens, cfg.ttlMs], o)
      out = { cell: c, serial }
    }
    this.wake(g)
    return out
  }

  /** This thread's fetch of `key` brought no slice: the key is decided exactly until `exactUntil` (ms; 0: not at all). */
  release(key: string, exactUntil: number): void {
    const g = this.locate(key)
    lockWord(this.locks, g, this.me)
    const c = this.fetchOf(g)
    if (c !== -1) {
      if (exactUntil > 0) {
        this.ints[c * INTS + STATE] = EXACT
        this.dbl[c * DOUBLES + UNTIL] = exactUntil
      } else this.empty(c)
    }
    this.wake(g)
  }

  /** Tokens spent from `key`'s lease by a request that ended up committing nothing: back to the lease, or to the store if it ended. */
  refund(key: string, lim: Leased, cfg: LeaseConfig, amount: number): void {
    const g = this.locate(key)
    lockWord(this.locks, g, this.me)
    const c = this.find(g)
    if (c !== -1 && this.ints[c * INTS + STATE] === LEASE && this.sameLimit(c * DOUBLES, lim, cfg))
      this.dbl[c * DOUBLES + TOKENS] = this.dbl[c * DOUBLES + TOKENS]! + amount
    else this.returns.push({ key, limit: bucketLimit(lim.rate, lim.burst), amount })
    unlockWord(this.locks, g)
  }

  /** End the lease `open()` returned, if it is still that one (its expiry timer). */
  end(cell: number, serial: number): void {
    const g = Math.floor(cell / WAYS)
    lockWord(this.locks, g, this.me)
    if (this.ints[cell * INTS + STATE] === LEASE && this.ints[cell * INTS + SERIAL] === serial) {
      this.takeOut(cell)
      this.empty(cell)
    }
    unlockWord(this.locks, g)
  }

  /** End every lease expired by `now` (and forget ended exact modes and abandoned fetches); `all`: every lease (close). */
  sweep(now: number, all = false): void {
    const n = this.ints
    for (let g = 0; g < this.groups; g++) {
      let busy = false
      for (let c = g * WAYS; c < (g + 1) * WAYS && !busy; c++) busy = n[c * INTS + STATE] !== EMPTY
      if (!busy) continue // a racy read; a cell filled meanwhile is not due yet
      lockWord(this.locks, g, this.me)
      let abandoned = false
      for (let c = g * WAYS; c < (g + 1) * WAYS; c++) {
        const st = n[c * INTS + STATE]
        const ended = this.dbl[c * DOUBLES + UNTIL]! <= now
        if (st === LEASE && (all || ended)) {
          this.takeOut(c)
          this.empty(c)
        } else if (st === EXACT && ended) this.empty(c)
        else if (st === FETCHING && ended) {
          this.empty(c)
          abandoned = true
        }
      }
      // Requests waiting for an abandoned fetch go on at once.
      if (abandoned) this.wake(g)
      else unlockWord(this.locks, g)
    }
  }

  /**
   * Supervisor, after worker thread `threadId` died: free the locks it held
   * and the fetches it had started (their waiters then fetch themselves).
   * Its leases stay: they are in this table, not in the dead thread.
   */
  releaseOf(threadId: number): number {
    const owner = lockOwner(threadId)
    let n = 0
    for (let g = 0; g < this.groups; g++) {
      const freed = freeIfOwned(this.locks, g, owner)
      lockWord(this.locks, g, this.me)
      let woke = freed
      for (let c = g * WAYS; c < (g + 1) * WAYS; c++) {
        if (this.ints[c * INTS + STATE] === FETCHING && this.ints[c * INTS + OWNER] === owner) {
          this.empty(c)
          woke = true
        }
      }
      if (woke) {
        n++
        this.wake(g)
      } else unlockWord(this.locks, g)
    }
    return n
  }

  /** The group of `key`; its fingerprint is left in loc (never (0, 0): that marks an empty cell). */
  private locate(key: string): number {
    sipHash(this.seed, key, true, 1, 3, this.loc, 0)
    if (this.loc[0] === 0 && this.loc[1] === 0) this.loc[1] = 1
    return (this.loc[1]! >>> 0) % this.groups
  }

  /** The cell of the located key in group `g`, or -1. */
  private find(g: number): number {
    const n = this.ints
    const f1 = this.loc[0]!
    const f2 = this.loc[1]!
    for (let c = g * WAYS; c < (g + 1) * WAYS; c++) {
      if (n[c * INTS + FP1] === f1 && n[c * INTS + FP2] === f2 && n[c * INTS + STATE] !== EMPTY) return c
    }
    return -1
  }

  /** The located key's cell if this thread is fetching it, else -1. */
  private fetchOf(g: number): number {
    const c = this.find(g)
    return c !== -1 && this.ints[c * INTS + STATE] === FETCHING && this.ints[c * INTS + OWNER] === this.me ? c : -1
  }

  /** A cell of group `g` for the located key: empty, else an ended exact mode, an expired lease (its rest goes back) or an abandoned fetch; -1 if all are live. */
  private claim(g: number, now: number): number {
    const n = this.ints
    let c = -1
    for (let i = g * WAYS; i < (g + 1) * WAYS && c === -1; i++) if (n[i * INTS + STATE] === EMPTY) c = i
    if (c !== -1) Atomics.add(this.header, 1, 1)
    for (let i = g * WAYS; i < (g + 1) * WAYS && c === -1; i++) {
      const st = n[i * INTS + STATE]
      if (st !== EMPTY && this.dbl[i * DOUBLES + UNTIL]! <= now) {
        if (st === LEASE) this.takeOut(i)
        c = i
      }
    }
    if (c !== -1) {
      n[c * INTS + FP1] = this.loc[0]!
      n[c * INTS + FP2] = this.loc[1]!
    }
    return c
  }

  private sameLimit(o: number, lim: Leased, cfg: LeaseConfig): boolean {
    const d = this.dbl
    return d[o + RATE] === lim.rate && d[o + BURST] === lim.burst && d[o + SLICE] === cfg.tokens && d[o + TTL] === cfg.ttlMs
  }

  /** Move a lease's unspent tokens to `returns` (caller holds the lock). */
  private takeOut(c: number): void {
    const o = c * DOUBLES
    const tokens = this.dbl[o + TOKENS]!
    this.dbl[o + TOKENS] = 0
    if (tokens <= EPSILON) return
    const len = this.ints[c * INTS + KEYLEN]!
    const key = String.fromCharCode(...this.keys.subarray(c * KEY_UNITS, c * KEY_UNITS + len))
    this.returns.push({ key, limit: bucketLimit(this.dbl[o + RATE]!, this.dbl[o + BURST]!), amount: tokens })
  }

  private empty(c: number): void {
    this.ints[c * INTS + STATE] = EMPTY
    this.ints[c * INTS + FP1] = 0
    this.ints[c * INTS + FP2] = 0
    Atomics.sub(this.header, 1, 1)
  }

  /** Bump the group's generation, unlock, and wake whoever waits on it. */
  private wake(g: number): void {
    Atomics.add(this.gens, g, 1)
    unlockWord(this.locks, g)
    Atomics.notify(this.gens, g)
  }
}

function layout(groups: number): { dbl: number; ints: number; locks: number; gens: number; keys: number; total: number } {
  const cells = groups * WAYS
  const dbl = HEADER_BYTES // 8-byte aligned
  const ints = dbl + cells * DOUBLES * 8
  const locks = ints + cells * INTS * 4
  const gens = locks + groups * 4
  const keys = gens + groups * 4
  return { dbl, ints, locks, gens, keys, total: keys + cells * KEY_UNITS * 2 }
}
