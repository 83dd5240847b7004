/**
 * Concurrency (limit kind 4): slots held by requests in flight, at most
 * `max` at once. A request's check takes a slot; an adjustment gives it back
 * when the request's exchange ends, naming when the slot was taken (`at`). A
 * slot whose holder never gives it back (a killed process) expires on its
 * own, between 2/3 × `leaseS` and `leaseS` after it was taken, however many
 * other requests come and go meanwhile: one count with one expiry, pushed
 * back by every new request, would never let a dead holder's slot go under
 * steady traffic. So slots are counted per lease bucket (a third of the
 * lease): the state is the newest bucket's index and the slots taken in it
 * and in the two before it; a bucket's slots expire as a whole when the
 * bucket three after it starts. A holder that lives longer than that renews
 * its slot (give back at its old time and take one now, in one adjustment
 * call; http/slot-holds.ts does it every third of the lease).
 *
 * A give-back comes off the bucket its `at` falls in; a clock a little off
 * (a gateway's `at` against the store server's clock) may name the bucket
 * next to it, so what that bucket lacks comes off the newer neighbour, then
 * the older. A give-back whose bucket has expired has nothing left to give.
 *
 * The maths work on four numbers, never on objects: a take and a give-back
 * come with every request, so the in-process stores run them on their cells
 * in place (stepCells, adjustCells), and step / adjust are the same maths on
 * a state object. Pure but for those numbers' registers (one thread each);
 * times in seconds. Its Lua and PL/pgSQL twins are beside this file.
 */
import { EPSILON, type Limit, type LimitKind, type Step } from '../../algorithm.js'
import { SQL } from './postgres.js'
import { LUA } from './redis.js'

export interface ConcurrencyLimit extends Limit {
  /** Slots: requests in flight at once. */
  max: number
  /** Longest a slot stays taken without being given back or renewed (seconds). */
  leaseS: number
}

export interface SlotsState {
  /** Index of the newest lease bucket: floor(t × 3 / leaseS). */
  bucket: number
  /** Slots taken in the newest bucket, the one before it and the one before that. */
  c0: number
  c1: number
  c2: number
}

/** Lease buckets are a third of the lease; the twins compute the index with the same operations. */
export const bucketOf = (t: number, leaseS: number): number => Math.floor((t * 3) / leaseS)

/**
 * How far past a bucket's end its expiry is put, in buckets: an index near
 * 1e10 carries ~2e-6 of rounding, so at exactly the computed end floor() may
 * still read the bucket before; a state kept a moment longer loses nothing.
 */
const EXPIRY_MARGIN = 1e-3

function snap(x: number): number {
  const r = Math.round(x)
  return Math.abs(x - r) < EPSILON ? r : x
}

/**
 * The state being worked on (no object per request): bucket index, then the slots of it and of
 * the two before it. A typed array, not module variables: a `let` of the module is read through
 * its context with a check per read.
 */
const R = new Float64Array(4)

function readState(s: SlotsState): void {
  R[0] = s.bucket
  R[1] = s.c0
  R[2] = s.c1
  R[3] = s.c2
}

function readCells(cells: Float64Array, off: number): void {
  R[0] = cells[off]!
  R[1] = cells[off + 1]!
  R[2] = cells[off + 2]!
  R[3] = cells[off + 3]!
}

function writeCells(cells: Float64Array, off: number): void {
  cells[off] = R[0]!
  cells[off + 1] = R[1]!
  cells[off + 2] = R[2]!
  cells[off + 3] = R[3]!
}

/** Brings the state to `now`: buckets that have passed shift out (time never moves backwards). */
function shiftTo(l: ConcurrencyLimit, now: number): void {
  const nb = bucketOf(now, l.leaseS)
  const d = nb - R[0]!
  if (d <= 0) return
  R[3] = d === 1 ? R[2]! : d === 2 ? R[1]! : 0
  R[2] = d === 1 ? R[1]! : 0
  R[1] = 0
  R[0] = nb
}

/** Free slots: never below zero (renewals take a slot whatever the limit; a reload may lower it). */
const free = (l: ConcurrencyLimit): number => Math.max(0, snap(l.max - (R[1]! + R[2]! + R[3]!)))

/** When forgetting the state is lossless: its newest taken slot's bucket has expired (now when none is taken). */
function expiry(l: ConcurrencyLimit, now: number): number {
  const b = R[0]!
  const newest = R[1]! > 0 ? b : R[2]! > 0 ? b - 1 : R[3]! > 0 ? b - 2 : undefined
  return newest === undefined ? now : ((newest + 3 + EXPIRY_MARGIN) * l.leaseS) / 3
}

/** Takes `cost` slots when they fit; false (nothing taken) when they do not. */
function take(l: ConcurrencyLimit, cost: number): boolean {
  if (R[1]! + R[2]! + R[3]! + cost > l.max + EPSILON) return false
  R[1] = snap(R[1]! + cost)
  return true
}

/**
 * `amount` > 0: gives back slots taken at `at`, from their bucket, then the newer neighbour, then the
 * older; false when that bucket has expired (nothing left to give). `amount` < 0: takes −amount more
 * now, whatever the limit (a renewal).
 */
function adjustBy(l: ConcurrencyLimit, amount: number, at: number): boolean {
  if (amount < 0) {
    R[1] = snap(R[1]! - amount)
    return true
  }
  const i = R[0]! - bucketOf(at, l.leaseS)
  if (i > 2) return false
  const from = i > 0 ? i : 0
  let rest = amount
  for (let k = 0; k < 3 && rest > 0; k++) {
    // Slot counts sit at R[1 + j] for bucket j back from the newest.
    const j = k === 0 ? from : k === 1 ? from - 1 : from + 1
    if (j < 0 || j > 2) continue
    const have = R[1 + j]!
    const t = rest < have ? rest : have
    if (t <= 0) continue
    R[1 + j] = snap(have - t)
    rest -= t
  }
  return true
}

/** The state in the registers, brought to `now`, or a fresh one. */
function begin(state: SlotsState | undefined, l: ConcurrencyLimit, now: number): void {
  if (state === undefined) {
    R[0] = bucketOf(now, l.leaseS)
    R[1] = R[2] = R[3] = 0
  } else readState(state)
  shiftTo(l, now)
}

const held = (): SlotsState => ({ bucket: R[0]!, c0: R[1]!, c1: R[2]!, c2: R[3]! })

export const CONCURRENCY_KIND: LimitKind<ConcurrencyLimit, SlotsState> = {
  id: 4,
  name: 'concurrency',
  step(state, l, cost, now): Step<SlotsState> {
    begin(state, l, now)
    // When a slot frees is not known (a request ending): one second, as short as Retry-After goes.
    const allowed = take(l, cost)
    return { allowed, value: free(l), retryAfter: allowed ? 0 : 1, state: held(), expireAt: expiry(l, now) }
  },
  stepCells(cells, off, live, l, cost, now, out) {
    if (live) {
      readCells(cells, off)
      shiftTo(l, now)
    } else begin(undefined, l, now)
    out.allowed = take(l, cost)
    out.value = free(l)
    out.retryAfter = out.allowed ? 0 : 1
    if (!out.allowed) return Number.NaN // a reject writes nothing
    writeCells(cells, off)
    return expiry(l, now)
  },
  /** amount > 0: give back slots taken at `at`; amount < 0: take more now, whatever the limit (a renewal). */
  adjust(state, l, amount, now, at = now) {
    if (state === undefined && amount >= 0) return undefined // nothing taken
    begin(state, l, now)
    if (!adjustBy(l, amount, at)) return undefined
    return { allowed: true, value: free(l), retryAfter: 0, state: held(), expireAt: expiry(l, now) }
  },
  adjustCells(cells, off, l, amount, now, at = now) {
    readCells(cells, off)
    shiftTo(l, now)
    if (!adjustBy(l, amount, at)) return Number.NaN
    writeCells(cells, off)
    return expiry(l, now)
  },
  load: (cells, off) => ({ bucket: cells[off]!, c0: cells[off + 1]!, c1: cells[off + 2]!, c2: cells[off + 3]! }),
  save(s, cells, off) {
    cells[off] = s.bucket
    cells[off + 1] = s.c0
    cells[off + 2] = s.c1
    cells[off + 3] = s.c2
  },
  limit: (p) => concurrencyLimit(p[0]!, p[1]!),
  lua: LUA,
  sql: SQL,
  sample: {
    // A lease far longer than a run: no bucket expires within it, so every store holds the same slots.
    params: [
      { min: 1, max: 20, integer: true },
      { min: 3600, max: 3600 },
    ],
    drift: () => 0,
    edge: () => Infinity,
    adjusts: true,
  },
}

export function concurrencyLimit(max: number, leaseS: number): ConcurrencyLimit {
  return { kind: CONCURRENCY_KIND, params: [max, leaseS], max, leaseS }
}
