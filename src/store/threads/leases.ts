/**
 * The lease table of one gateway process (store/leasing.ts): which hot keys
 * hold a slice of their shared limit here, and how much of it is unspent.
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
 * The cells' memory and the reads and writes these transitions are made of
 * are in lease-cells.ts. A cell keeps its key's text (for the give-back call), so keys longer than
 * KEY_UNITS UTF-16 units are not leased (decided exactly); neither is a key
 * whose group is full (4 live leases, fetches or exact modes of other keys):
 * take() counts those in `full` (fairvisor_lease_table_full_total). Both are
 * safe: exact is what leases save.
 */
import { randomBytes } from 'node:crypto'
import { EPSILON, type LeaseDescription, type Limit } from '../../algorithms/algorithm.js'
import * as Cells from './lease-cells.js'
import { LeaseCells } from './lease-cells.js'
import { freeIfOwned, lockOwner, lockWord, unlockWord } from './lock.js'

export { KEY_UNITS } from './lease-cells.js'

// Module-local copies: V8 folds a module's own constants into hot code, not imported bindings (table.ts).
const { DOUBLES, EMPTY, EXACT, FETCHING, INTS, KEY_UNITS, LEASE, leaseBuffer, OWNER, SERIAL, STATE, TOKENS, UNTIL, WAYS } = Cells
/** Cells per process by default (FAIRVISOR_LEASE_TABLE_KEYS): hot keys are few; ~2.7 MB. */
export const DEFAULT_CELLS = 8192
/**
 * A fetch this old is abandoned: every store call ends by its deadline
 * (FAIRVISOR_STORE_TIMEOUT_MS, at most 60 s), so its thread died without the
 * supervisor freeing it, or is stalled. Another thread may then fetch the key,
 * and the sweep frees the cell. Safe: the late open() of the old fetch finds
 * the cell not its own and gives its slice straight back.
 */
export const FETCH_BOUND_MS = 120_000
/** Bounds of FAIRVISOR_LEASE_TABLE_KEYS: a few groups at least; at most ~350 MB (334 bytes a cell: it holds its key's text). */
export const MIN_CELLS = 16
export const MAX_CELLS = 1_048_576

/** What take() decided. */
export const SPENT = 0
export const WAIT = 1
export const FETCH = 2
export const DECIDE_EXACT = 3
export type Taken = typeof SPENT | typeof WAIT | typeof FETCH | typeof DECIDE_EXACT

export class LeaseTable extends LeaseCells {
  /** Set by take(): the figure of a SPENT (what the limit would show), the generation to wait on after a WAIT. */
  value = 0
  group = 0
  gen = 0
  /** take()s of this thread decided exactly because the key's group had no cell to spare (the table is too small for the hot keys). */
  full = 0

  /** A table of `cells` cells, rounded up to whole groups of WAYS; `seed` (16 bytes) for tests, else random. */
  static create(cells = DEFAULT_CELLS, seed: Uint8Array = randomBytes(16)): LeaseTable {
    return new LeaseTable(leaseBuffer(Math.max(1, Math.ceil(cells / WAYS)), seed), 0)
  }

  /** Spend `cost` from `key`'s lease of `limit`, or say what to do instead; `now` in epoch ms. */
  take(key: string, limit: Limit, lease: LeaseDescription, cost: number, now: number): Taken {
    if (cost >= lease.tokens || key.length > KEY_UNITS) return DECIDE_EXACT
    const g = this.locate(key)
    const d = this.dbl
    const n = this.ints
    lockWord(this.locks, g, this.me)
    let c = this.find(g)
    if (c !== -1) {
      const st = n[c * INTS + STATE]!
      const o = c * DOUBLES
      if (st === LEASE && d[o + UNTIL]! > now && this.sameLimit(c, limit, lease)) {
        if (d[o + TOKENS]! + EPSILON >= cost) {
          d[o + TOKENS] = d[o + TOKENS]! - cost
          this.value = this.shown(c)
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

  /** This thread's fetch of `key` brought a slice: `tokens` unspent, `left` in the shared limit. Returns the lease's cell and serial (for end()), or undefined when none was open. */
  open(
    key: string,
    limit: Limit,
    lease: LeaseDescription,
    tokens: number,
    left: number,
    now: number,
  ): { cell: number; serial: number } | undefined {
    const g = this.locate(key)
    lockWord(this.locks, g, this.me)
    const c = this.fetchOf(g)
    let out: { cell: number; serial: number } | undefined
    // Not ours any more (the supervisor freed it): the slice goes straight back.
    if (c === -1) this.returns.push({ key, limit, amount: tokens })
    else out = { cell: c, serial: this.fill(c, key, limit, lease, tokens, left, now) }
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
  refund(key: string, limit: Limit, lease: LeaseDescription, amount: number): void {
    const g = this.locate(key)
    lockWord(this.locks, g, this.me)
    const c = this.find(g)
    if (c !== -1 && this.ints[c * INTS + STATE] === LEASE && this.sameLimit(c, limit, lease))
      this.dbl[c * DOUBLES + TOKENS] = this.dbl[c * DOUBLES + TOKENS]! + amount
    else this.returns.push({ key, limit, amount })
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
}
