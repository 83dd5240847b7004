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
 * Pure; times in seconds. Its Lua and PL/pgSQL twins are beside this file.
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

const slots = (bucket: number, c0: number, c1: number, c2: number): SlotsState => ({ bucket, c0, c1, c2 })

/** The state at `now`: buckets that have passed shift out (time never moves backwards). */
function current(state: SlotsState | undefined, l: ConcurrencyLimit, now: number): SlotsState {
  const b = bucketOf(now, l.leaseS)
  if (state === undefined) return slots(b, 0, 0, 0)
  const d = b - state.bucket
  if (d <= 0) return state
  if (d === 1) return slots(b, 0, state.c0, state.c1)
  if (d === 2) return slots(b, 0, 0, state.c0)
  return slots(b, 0, 0, 0)
}

/** Free slots: never below zero (renewals take a slot whatever the limit; a reload may lower it). */
function free(l: ConcurrencyLimit, s: SlotsState): number {
  return Math.max(0, snap(l.max - (s.c0 + s.c1 + s.c2)))
}

/** When forgetting the state is lossless: its newest taken slot's bucket has expired (now when none is taken). */
function expiry(s: SlotsState, l: ConcurrencyLimit, now: number): number {
  const newest = s.c0 > 0 ? s.bucket : s.c1 > 0 ? s.bucket - 1 : s.c2 > 0 ? s.bucket - 2 : undefined
  return newest === undefined ? now : ((newest + 3 + EXPIRY_MARGIN) * l.leaseS) / 3
}

const stepOf = (s: SlotsState, l: ConcurrencyLimit, now: number): Step<SlotsState> => ({
  allowed: true,
  value: free(l, s),
  retryAfter: 0,
  state: s,
  expireAt: expiry(s, l, now),
})

/** Gives `amount` slots taken at `at` back; undefined when their bucket has expired (nothing left to give). */
function giveBack(s: SlotsState, l: ConcurrencyLimit, amount: number, at: number): SlotsState | undefined {
  const i = s.bucket - bucketOf(at, l.leaseS)
  if (i > 2) return undefined
  const from = Math.max(0, i)
  // From its bucket, then the newer neighbour, then the older (locals, not an array: this runs per request).
  let c0 = s.c0
  let c1 = s.c1
  let c2 = s.c2
  let rest = amount
  for (let k = 0; k < 3 && rest > 0; k++) {
    const j = k === 0 ? from : k === 1 ? from - 1 : from + 1
    const have = j === 0 ? c0 : j === 1 ? c1 : j === 2 ? c2 : 0
    const t = Math.min(rest, have)
    if (t <= 0) continue
    if (j === 0) c0 = snap(c0 - t)
    else if (j === 1) c1 = snap(c1 - t)
    else c2 = snap(c2 - t)
    rest -= t
  }
  return slots(s.bucket, c0, c1, c2)
}

export const CONCURRENCY_KIND: LimitKind<ConcurrencyLimit, SlotsState> = {
  id: 4,
  name: 'concurrency',
  step(state, l, cost, now): Step<SlotsState> {
    const s = current(state, l, now)
    // Object literals, not spreads: a spread is a generic copy in V8, and this runs per request.
    if (s.c0 + s.c1 + s.c2 + cost <= l.max + EPSILON) return stepOf(slots(s.bucket, snap(s.c0 + cost), s.c1, s.c2), l, now)
    // When a slot frees is not known (a request ending): one second, as short as Retry-After goes.
    return { allowed: false, value: free(l, s), retryAfter: 1, state: s, expireAt: expiry(s, l, now) }
  },
  /** amount > 0: give back slots taken at `at`; amount < 0: take more now, whatever the limit (a renewal). */
  adjust(state, l, amount, now, at = now) {
    if (state === undefined && amount >= 0) return undefined // nothing taken
    const s = current(state, l, now)
    const next = amount < 0 ? slots(s.bucket, snap(s.c0 - amount), s.c1, s.c2) : giveBack(s, l, amount, at)
    return next === undefined ? undefined : stepOf(next, l, now)
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
