/**
 * Sliding window (limit kind 5): the count of the last `windowS` seconds,
 * estimated from two counters as Cloudflare and Kong do: the previous
 * window's count weighted by the share of it still inside the sliding
 * window, plus the current window's count. A request is allowed when the
 * estimate plus its cost stays within `limit`.
 *
 * Windows follow one another from the key's first request after a quiet
 * spell (nothing counted in the current or the previous window), not from
 * the clock. The estimate takes the previous window's requests as evenly
 * spread, and errs most when they all came at its end; windows cut by the
 * clock would make that the rule for every client that starts sending late
 * in one (nearly twice the limit through in its first window). Counted from
 * the first request, an evenly spaced stream never gets more than limit + 1
 * through in any window-long span, and keys' windows do not all turn at the
 * same instant.
 * docs/algorithms.md states the error bound.
 *
 * Pure; times in seconds. The step's figure is what is left (limit −
 * estimate) and its wait the seconds until the cost would fit, as the
 * token bucket's. Its Lua and PL/pgSQL twins are beside this file.
 */
import { EPSILON, type Limit, type LimitKind, type Step } from '../../algorithm.js'
import { SQL } from './postgres.js'
import { LUA } from './redis.js'

export interface SlidingLimit extends Limit {
  /** Largest count (sum of costs) in any `windowS` seconds, as estimated. */
  limit: number
  windowS: number
}

export interface SlidingState {
  /** The previous window's count. */
  prev: number
  /** The current window's count. */
  cur: number
  /** Start of the current window (epoch seconds). */
  start: number
}

/** Counts within EPSILON of a whole number are that number (0.7 + 0.2 + 0.1 is not exactly 1). */
function snap(x: number): number {
  const r = Math.round(x)
  return Math.abs(x - r) < EPSILON ? r : x
}

/** The window `now` falls in and the counts carried into it; a new window starts at `now` when nothing counts any more. */
function current(s: SlidingState | undefined, l: SlidingLimit, now: number): SlidingState {
  if (s !== undefined) {
    const k = Math.floor(Math.max(0, now - s.start) / l.windowS)
    if (k === 0 && (s.prev > 0 || s.cur > 0)) return s
    if (k === 1 && s.cur > 0) return { prev: s.cur, cur: 0, start: s.start + l.windowS }
  }
  return { prev: 0, cur: 0, start: now }
}

/** The count of the last windowS seconds as estimated at `now`. */
const estimate = (w: SlidingState, l: SlidingLimit, now: number): number =>
  snap(w.prev * (1 - Math.max(0, now - w.start) / l.windowS) + w.cur)

/**
 * When, with no more requests, the estimate is down to `x`: in this window
 * as the previous one's share leaves, or in the next as this one's does.
 */
function fitsAt(w: SlidingState, l: SlidingLimit, x: number, now: number): number {
  if (w.cur <= x) return w.prev > 0 ? w.start + l.windowS * (1 - (x - w.cur) / w.prev) : now
  return w.start + 2 * l.windowS - (l.windowS * x) / w.cur
}

/** Whole seconds until `t`, at least 1. */
const secondsTo = (t: number, now: number): number => Math.max(1, Math.ceil(t - now - EPSILON))

/** When forgetting the state is lossless: once both its counts are out of the window. */
const expiry = (w: SlidingState, l: SlidingLimit): number =>
  w.cur > 0 ? w.start + 2 * l.windowS : w.prev > 0 ? w.start + l.windowS : w.start

export const SLIDING_WINDOW_KIND: LimitKind<SlidingLimit, SlidingState> = {
  id: 5,
  name: 'sliding_window',
  step(state, l, cost, now): Step<SlidingState> {
    const w = current(state, l, now)
    const est = estimate(w, l, now)
    if (est + cost > l.limit + EPSILON) {
      // A cost above the limit never fits: its wait is until the window is empty.
      const wait = secondsTo(fitsAt(w, l, Math.max(0, l.limit - cost), now), now)
      return { allowed: false, value: snap(l.limit - est), retryAfter: wait, state: w, expireAt: expiry(w, l) }
    }
    const next = { prev: w.prev, cur: w.cur + cost, start: w.start }
    const left = snap(l.limit - est - cost)
    // RateLimit-Reset of an allowed request: until one more unit fits (0: it does now).
    const retryAfter = left + EPSILON < 1 ? secondsTo(fitsAt(next, l, Math.max(0, l.limit - 1), now), now) : 0
    return { allowed: true, value: left, retryAfter, state: next, expireAt: expiry(next, l) }
  },
  /** Gives back from the current window's count, the rest from the previous one's (never below zero), or charges on top. */
  adjust(state, l, amount, now) {
    const w = current(state, l, now)
    if (amount >= 0 && w.prev === 0 && w.cur === 0) return undefined // nothing counted
    let cur = w.cur - amount
    let prev = w.prev
    if (cur < 0) {
      prev = Math.max(0, prev + cur)
      cur = 0
    }
    const next = { prev, cur, start: w.start }
    return { allowed: true, value: snap(l.limit - estimate(next, l, now)), retryAfter: 0, state: next, expireAt: expiry(next, l) }
  },
  load: (cells, off) => ({ prev: cells[off]!, cur: cells[off + 1]!, start: cells[off + 2]! }),
  save(s, cells, off) {
    cells[off] = s.prev
    cells[off + 1] = s.cur
    cells[off + 2] = s.start
  },
  limit: (p) => slidingLimit(p[0]!, p[1]!),
  lua: LUA,
  sql: SQL,
  sample: {
    // Windows of a few seconds: a sequence of requests (up to ~0.5 s) often crosses into the next one.
    params: [
      { min: 1, max: 20, integer: true },
      { min: 1, max: 3, integer: true },
    ],
    // The previous window's share leaves at most limit / windowS per second.
    drift: (l) => l.limit / l.windowS,
    // What was left before the request against its cost.
    edge: (_l, o, cost) => Math.abs((o.allowed ? o.value + cost : o.value) - cost),
  },
}

export function slidingLimit(limit: number, windowS: number): SlidingLimit {
  return { kind: SLIDING_WINDOW_KIND, params: [limit, windowS], limit, windowS }
}
