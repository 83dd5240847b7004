/**
 * The lease table's memory (leases.ts holds its state transitions): the
 * layout of its SharedArrayBuffer and the cell reads and writes the
 * transitions are made of. Every method here runs with the cell's group
 * locked by the caller, except locate() and fetching() (a read that locks).
 *
 * A cell: its key's 64-bit fingerprint, state, the thread fetching it, a
 * serial per lease, the key's text (for the give-back call), and the leased
 * limit as numbers (kind id and parameters, slice and lifetime): a cell
 * tells a changed limit from the same one by them, and any thread can give
 * the unspent part back to the remote store, reading the limit back through
 * the kind table (algorithms/kinds/index.ts).
 */
import { EPSILON, PARAMS, type LeaseDescription, type Limit } from '../../algorithms/algorithm.js'
import { KINDS } from '../../algorithms/kinds/index.js'
import type { Adjustment } from '../store.js'
import { lockOwner, lockWord, ownerThread, unlockWord } from './lock.js'
import { sipHash, sipKey } from './siphash.js'

export const WAYS = 4
/** Header: groups and cells used (int32 each), then the 16-byte hash seed. */
const HEADER_BYTES = 24
/** Longest key a cell holds. */
export const KEY_UNITS = 120

// Cell states.
export const EMPTY = 0
export const FETCHING = 1
export const LEASE = 2
export const EXACT = 3
// Int32 fields per cell.
const FP1 = 0
const FP2 = 1
export const STATE = 2
export const OWNER = 3
export const SERIAL = 4
const KEYLEN = 5
const KIND = 6
export const INTS = 7
// Float64 fields per cell.
export const TOKENS = 0
const LEFT = 1
/** Lease expiry, or the end of exact mode (epoch ms). */
export const UNTIL = 2
const SLICE = 3
const TTL = 4
/** The limit's PARAMS (3: sameLimit compares them unrolled) parameters. */
const PARAM = 5
export const DOUBLES = PARAM + PARAMS

/** Bytes of a table of `groups` groups, and where each of its arrays starts. */
export function layout(groups: number): { dbl: number; ints: number; locks: number; gens: number; keys: number; total: number } {
  const cells = groups * WAYS
  const dbl = HEADER_BYTES // 8-byte aligned
  const ints = dbl + cells * DOUBLES * 8
  const locks = ints + cells * INTS * 4
  const gens = locks + groups * 4
  const keys = gens + groups * 4
  return { dbl, ints, locks, gens, keys, total: keys + cells * KEY_UNITS * 2 }
}

/** A new zeroed buffer of `groups` groups, its seed written in the header. */
export function leaseBuffer(groups: number, seed: Uint8Array): SharedArrayBuffer {
  sipKey(seed) // checks its length
  const buffer = new SharedArrayBuffer(layout(groups).total)
  new Int32Array(buffer, 0, 2)[0] = groups
  new Uint8Array(buffer, 8, 16).set(seed)
  return buffer
}

export class LeaseCells {
  readonly buffer: SharedArrayBuffer
  readonly groups: number
  /** Group generation words: Atomics.waitAsync on them (leasing.ts waits for another fetch). */
  readonly gens: Int32Array
  protected readonly header: Int32Array
  protected readonly locks: Int32Array
  protected readonly ints: Int32Array
  protected readonly dbl: Float64Array
  private readonly keys: Uint16Array
  protected readonly me: number
  /** The SipHash key, read once from the header. */
  private readonly seed: Int32Array
  /** The located key's hash: high, low (its fingerprint; the low half names its group). */
  private readonly loc = new Int32Array(2)
  /** Unspent tokens taken out of ended leases, for the caller to give back to the remote store (then cleared). */
  returns: Adjustment[] = []

  /** The table behind `buffer` (made by leaseBuffer(), maybe in another thread), used by thread `threadId`. */
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

  /** The group of `key`; its fingerprint is left in loc (never (0, 0): that marks an empty cell). */
  protected locate(key: string): number {
    sipHash(this.seed, key, true, 1, 3, this.loc, 0)
    if (this.loc[0] === 0 && this.loc[1] === 0) this.loc[1] = 1
    return (this.loc[1]! >>> 0) % this.groups
  }

  /** The cell of the located key in group `g`, or -1. */
  protected find(g: number): number {
    const n = this.ints
    const f1 = this.loc[0]!
    const f2 = this.loc[1]!
    for (let c = g * WAYS; c < (g + 1) * WAYS; c++) {
      if (n[c * INTS + FP1] === f1 && n[c * INTS + FP2] === f2 && n[c * INTS + STATE] !== EMPTY) return c
    }
    return -1
  }

  /** The located key's cell if this thread is fetching it, else -1. */
  protected fetchOf(g: number): number {
    const c = this.find(g)
    return c !== -1 && this.ints[c * INTS + STATE] === FETCHING && this.ints[c * INTS + OWNER] === this.me ? c : -1
  }

  /** A cell of group `g` for the located key: empty, else an ended exact mode, an expired lease (its rest goes back) or an abandoned fetch; -1 if all are live. */
  protected claim(g: number, now: number): number {
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

  /** Cell `c` (fetched by this thread) becomes a lease of `tokens` for `key` on `limit`, `left` in the shared limit; returns its serial. */
  protected fill(c: number, key: string, limit: Limit, lease: LeaseDescription, tokens: number, left: number, now: number): number {
    const n = this.ints
    const d = this.dbl
    const o = c * DOUBLES
    n[c * INTS + STATE] = LEASE
    const serial = (n[c * INTS + SERIAL]! + 1) | 0
    n[c * INTS + SERIAL] = serial
    n[c * INTS + KEYLEN] = key.length
    n[c * INTS + KIND] = limit.kind.id
    for (let i = 0; i < key.length; i++) this.keys[c * KEY_UNITS + i] = key.charCodeAt(i)
    d[o + TOKENS] = tokens
    d[o + LEFT] = left
    d[o + UNTIL] = now + lease.ttlMs
    d[o + SLICE] = lease.tokens
    d[o + TTL] = lease.ttlMs
    for (let j = 0; j < PARAMS; j++) d[o + PARAM + j] = limit.params[j] ?? 0
    return serial
  }

  /** What the limit of cell `c` would show after spending from it: the shared limit's rest plus the slice's. */
  protected shown(c: number): number {
    return this.dbl[c * DOUBLES + LEFT]! + this.dbl[c * DOUBLES + TOKENS]!
  }

  /** Whether cell `c` leases this very limit and lease (a reload may have changed either). On every spend: unrolled, no read past `params`. */
  protected sameLimit(c: number, limit: Limit, lease: LeaseDescription): boolean {
    const d = this.dbl
    const o = c * DOUBLES + PARAM
    const p = limit.params
    const n = p.length
    return (
      d[o] === (n > 0 ? p[0] : 0) &&
      d[o + 1] === (n > 1 ? p[1] : 0) &&
      d[o + 2] === (n > 2 ? p[2] : 0) &&
      d[o - PARAM + SLICE] === lease.tokens &&
      d[o - PARAM + TTL] === lease.ttlMs &&
      this.ints[c * INTS + KIND] === limit.kind.id
    )
  }

  /**
   * Move a lease's unspent tokens to `returns`, as an adjustment of its limit
   * read back through the kind table (a kind outside it, which the gateway
   * never leases, keeps them: under-granting is the safe side).
   */
  protected takeOut(c: number): void {
    const o = c * DOUBLES
    const tokens = this.dbl[o + TOKENS]!
    this.dbl[o + TOKENS] = 0
    const kind = KINDS.get(this.ints[c * INTS + KIND]!)
    if (tokens <= EPSILON || kind === undefined) return
    const len = this.ints[c * INTS + KEYLEN]!
    const key = String.fromCharCode(...this.keys.subarray(c * KEY_UNITS, c * KEY_UNITS + len))
    const limit = kind.limit(Array.from(this.dbl.subarray(o + PARAM, o + PARAM + PARAMS)))
    this.returns.push({ key, limit, amount: tokens })
  }

  protected empty(c: number): void {
    this.ints[c * INTS + STATE] = EMPTY
    this.ints[c * INTS + FP1] = 0
    this.ints[c * INTS + FP2] = 0
    Atomics.sub(this.header, 1, 1)
  }

  /** Bump the group's generation, unlock, and wake whoever waits on it. */
  protected wake(g: number): void {
    Atomics.add(this.gens, g, 1)
    unlockWord(this.locks, g)
    Atomics.notify(this.gens, g)
  }
}
