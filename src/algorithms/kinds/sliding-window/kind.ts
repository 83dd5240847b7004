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
 * Delay (`maxDelayS` > 0, the third parameter): a request that does not fit
 * now, but would at an instant T within `maxDelayS`, is allowed now and
 * counted as if it came at T: in the window T falls in, the current one or
 * the next (a third counter, `next`), never later. Until T its cost counts
 * in full, so every later request fits only after T (each is held for its
 * own place in the queue) and each request forwarded at its T passes the
 * same test a request arriving then would: the plain window's error bound
 * holds for what is forwarded. The allowed outcome's wait is T − now
 * (its value, limit − estimate − cost, is below zero), which the engine
 * turns into a hold (algorithms/sliding-window.ts advise).
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
  /** Longest hold (s) of a request that does not fit now (max_delay_ms; 0: it is rejected). */
  maxDelayS: number
  /**
   * Only in an adjustment giving back a held request's charge (`giveBack`, the third parameter
   * below zero): the seconds it still had to wait, which tell the window it was counted for.
   */
  heldS?: number
}

export interface SlidingState {
  /** The previous window's count. */
  prev: number
  /** The current window's count. */
  cur: number
  /** Start of the current window (epoch seconds). */
  start: number
  /** Counted for the next window: requests held until an instant in it (0 without a delay). */
  next: number
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
    if (k === 0 && (s.prev > 0 || s.cur > 0 || s.next > 0)) return s
    if (k === 1 && (s.cur > 0 || s.next > 0)) return { prev: s.cur, cur: s.next, start: s.start + l.windowS, next: 0 }
    if (k === 2 && s.next > 0) return { prev: s.next, cur: 0, start: s.start + 2 * l.windowS, next: 0 }
  }
  return { prev: 0, cur: 0, start: now, next: 0 }
}

/** The count of the last windowS seconds as estimated `e` seconds into the window, what is counted for the next window included in full. */
const estimate = (w: SlidingState, l: SlidingLimit, e: number): number => snap(w.prev * (1 - e / l.windowS) + w.cur + w.next)

/**
 * When (seconds after the window's start; `e` when it already is) the estimate is down to `x`
 * with no more requests: in this window as the previous one's share leaves, in the next as this
 * one's does, or in the one after as the next one's does. Counted from the window's start, not
 * as an epoch instant, so a wait (this − e) keeps the precision epoch doubles lose (0.24 µs).
 */
function fitsAt(w: SlidingState, l: SlidingLimit, x: number, e: number): number {
  if (w.cur + w.next <= x) return w.prev > 0 ? l.windowS * (1 - (x - w.cur - w.next) / w.prev) : e
  if (w.next <= x) return 2 * l.windowS - (l.windowS * (x - w.next)) / w.cur
  return 3 * l.windowS - (l.windowS * x) / w.next
}

/** Whole seconds from `e` to `t` (both in the window), at least 1. */
const secondsTo = (t: number, e: number): number => Math.max(1, Math.ceil(t - e - EPSILON))

/** When forgetting the state is lossless: once every count is out of the window. */
const expiry = (w: SlidingState, l: SlidingLimit): number =>
  w.next > 0 ? w.start + 3 * l.windowS : w.cur > 0 ? w.start + 2 * l.windowS : w.prev > 0 ? w.start + l.windowS : w.start

export const SLIDING_WINDOW_KIND: LimitKind<SlidingLimit, SlidingState> = {
  id: 5,
  name: 'sliding_window',
  step(state, l, cost, now): Step<SlidingState> {
    const w = current(state, l, now)
    const e = Math.max(0, now - w.start)
    const est = estimate(w, l, e)
    if (est + cost > l.limit + EPSILON) {
      // A cost above the limit never fits: its wait is until the window is empty.
      const t = fitsAt(w, l, Math.max(0, l.limit - cost), e)
      const delayable = l.maxDelayS > 0 && cost <= l.limit + EPSILON
      if (delayable && t - e <= l.maxDelayS && t < 2 * l.windowS) {
        // Held until t, counted in the window t falls in.
        const held = t < l.windowS ? { ...w, cur: w.cur + cost } : { ...w, next: w.next + cost }
        return { allowed: true, value: snap(l.limit - est - cost), retryAfter: Math.max(0, t - e), state: held, expireAt: expiry(held, l) }
      }
      // With a delay it passes (held) from when t is at most maxDelayS away and in the window after that instant's.
      const from = delayable ? Math.max(t - l.maxDelayS, (Math.floor(t / l.windowS) - 1) * l.windowS) : t
      return { allowed: false, value: snap(l.limit - est), retryAfter: secondsTo(from, e), state: w, expireAt: expiry(w, l) }
    }
    const next = { prev: w.prev, cur: w.cur + cost, start: w.start, next: w.next }
    const left = snap(l.limit - est - cost)
    // RateLimit-Reset of an allowed request: until one more unit fits (0: it does now).
    const retryAfter = left + EPSILON < 1 ? secondsTo(fitsAt(next, l, Math.max(0, l.limit - 1), e), e) : 0
    return { allowed: true, value: left, retryAfter, state: next, expireAt: expiry(next, l) }
  },
  /**
   * Gives back from the current window's count, then the previous one's, then what is counted for
   * the next (never below zero), or charges on top; a held request's charge (heldS) from the next
   * window's count first when that is where it was counted. A charge given back from an earlier
   * window than its own only counts for longer: the estimate never drops below the truth.
   */
  adjust(state, l, amount, now) {
    const w = current(state, l, now)
    if (amount >= 0 && w.prev === 0 && w.cur === 0 && w.next === 0) return undefined // nothing counted
    let rest = amount
    let next = w.next
    // A held request's charge given back from the window it was counted for, when that is the next one.
    if (rest > 0 && l.heldS !== undefined && Math.max(0, now - w.start) + l.heldS >= l.windowS) {
      const take = Math.min(next, rest)
      next -= take
      rest -= take
    }
    let cur = w.cur - rest
    let prev = w.prev
    if (cur < 0) {
      prev += cur
      cur = 0
      if (prev < 0) {
        next = Math.max(0, next + prev)
        prev = 0
      }
    }
    const after = { prev, cur, start: w.start, next }
    return {
      allowed: true,
      value: snap(l.limit - estimate(after, l, Math.max(0, now - w.start))),
      retryAfter: 0,
      state: after,
      expireAt: expiry(after, l),
    }
  },
  load: (cells, off) => ({ prev: cells[off]!, cur: cells[off + 1]!, start: cells[off + 2]!, next: cells[off + 3]! }),
  save(s, cells, off) {
    cells[off] = s.prev
    cells[off + 1] = s.cur
    cells[off + 2] = s.start
    cells[off + 3] = s.next
  },
  limit: (p) => (p[2]! < 0 ? heldGiveBack(slidingLimit(p[0]!, p[1]!), -p[2]!) : slidingLimit(p[0]!, p[1]!, p[2] ?? 0)),
  // A held outcome (below zero) was counted for the window of the instant it waits for: say how far that still is.
  giveBack: (l, o, elapsedS) => (o.value < -EPSILON ? heldGiveBack(l, Math.max(0, o.retryAfter - elapsedS)) : undefined),
  lua: LUA,
  sql: SQL,
  sample: {
    // Windows of a few seconds: a sequence of requests (up to ~0.5 s) often crosses into the next one.
    params: [
      { min: 1, max: 20, integer: true },
      { min: 1, max: 3, integer: true },
      // Whole seconds of delay, 0 (no delay) among them, as the token bucket's.
      { min: 0, max: 3, integer: true },
    ],
    // The previous window's share leaves at most limit / windowS per second (no window counts more than limit).
    drift: (l) => l.limit / l.windowS,
    edge: slidingEdge,
  },
}

/**
 * How far an outcome lies from the allow / reject boundary, in the units of the value (the drift
 * converts seconds): what was left before the request against its cost; with a delay also its wait
 * against maxDelayS, exact for a held request, and unknown (so 0) for a reject whose whole-second
 * wait to being held is 1.
 */
function slidingEdge(l: SlidingLimit, o: { allowed: boolean; value: number; retryAfter: number }, cost: number): number {
  const fit = Math.abs((o.allowed ? o.value + cost : o.value) - cost)
  if (l.maxDelayS <= 0 || cost > l.limit) return fit
  if (o.allowed) return o.value < -EPSILON ? Math.min(fit, Math.abs(o.retryAfter - l.maxDelayS) * (l.limit / l.windowS)) : fit
  return o.retryAfter <= 1 ? 0 : fit
}

/** `maxDelayS` 0 keeps the two parameters of a window without delay. */
export function slidingLimit(limit: number, windowS: number, maxDelayS = 0): SlidingLimit {
  if (maxDelayS > 0) return { kind: SLIDING_WINDOW_KIND, params: [limit, windowS, maxDelayS], limit, windowS, maxDelayS }
  return { kind: SLIDING_WINDOW_KIND, params: [limit, windowS], limit, windowS, maxDelayS: 0 }
}

/**
 * The limit of an adjustment giving back a request held `heldS` more seconds: its third parameter
 * is −heldS (0, the instant reached, reads as a plain limit: the charge is in the current window).
 */
export function heldGiveBack(l: SlidingLimit, heldS: number): SlidingLimit {
  return { kind: SLIDING_WINDOW_KIND, params: [l.limit, l.windowS, -heldS], limit: l.limit, windowS: l.windowS, maxDelayS: 0, heldS }
}

/** The hold (ms, whole, ≥ 1) of an allowed outcome below zero, whose wait is `retryAfter` s; 0 for one that fits now. */
export function slidingWaitMs(left: number, retryAfter: number): number {
  return left < -EPSILON ? Math.max(1, Math.ceil(retryAfter * 1000 - EPSILON)) : 0
}
