/**
 * Window counter (limit kind 2): a count charged per request within a time
 * window, rejected when the count would pass its limit. Three window shapes:
 * aligned (`origin` ≥ 0: windows are floor((now − origin) / W) × W + origin,
 * so UTC periods, weeks from a Sunday) for spend budgets and day counters,
 * from the first hit (`origin` < 0) for loop detection, and calendar months
 * (W < 0: −W months of UTC, counted from January 1970, so W = −1 is a month
 * from the 1st 00:00 UTC) for monthly budgets, whose length no number of
 * seconds gives. Pure; times in seconds. Its Lua and PL/pgSQL twins are
 * beside this file; each finds a month's bounds on its own (Lua by civil-date
 * arithmetic, PostgreSQL by its calendar), all from the UTC day of `now`.
 */
import { EPSILON, type Limit, type LimitKind, type Step } from '../../algorithm.js'
import { SQL } from './postgres.js'
import { LUA } from './redis.js'

export interface CounterLimit extends Limit {
  /** Largest count allowed within one window. */
  limit: number
  /** Window length in seconds, or −n: n calendar months (UTC). */
  windowS: number
  /** Alignment origin in epoch seconds, or −1: a window starts at the first hit. */
  origin: number
}

export interface CounterState {
  count: number
  /** Start of the window the count belongs to (epoch seconds). */
  start: number
}

/** Sunday 1970-01-04T00:00:00Z: weeks are aligned to it. */
export const SUNDAY_ORIGIN_S = 3 * 86_400

const DAY_S = 86_400

/** Whole seconds until `end`, at least 1. */
const secondsTo = (end: number, now: number): number => Math.max(1, Math.ceil(end - now - EPSILON))

/**
 * Start and end (epoch seconds) of the span of `n` calendar months (UTC,
 * counted from January 1970) that `now` falls in. Read from the UTC day of
 * `now`, as the twins do, so the three agree to the instant.
 */
export function monthSpan(now: number, n: number): [number, number] {
  if (n === last.n && now >= last.start && now < last.end) return [last.start, last.end]
  const day = new Date(Math.floor(now / DAY_S) * DAY_S * 1000)
  const first = Math.floor(((day.getUTCFullYear() - 1970) * 12 + day.getUTCMonth()) / n) * n
  last = { n, start: Date.UTC(1970, first, 1) / 1000, end: Date.UTC(1970, first + n, 1) / 1000 }
  return [last.start, last.end]
}

/** The span monthSpan found last: checks of one month meet it again and again, and the Date arithmetic costs ~0.4 µs. */
let last = { n: 0, start: 0, end: 0 }

/** End of the window starting at `start`. */
const windowEnd = (l: CounterLimit, start: number): number => (l.windowS < 0 ? monthSpan(start, -l.windowS)[1] : start + l.windowS)

/**
 * The window `now` falls in, and the count carried into it from `state`. A stored window that
 * starts after `now` is the current one: a clock that is behind the one that wrote the state (a
 * stepped-back host clock, another database node, a fail-over replica) never resets a count.
 */
function current(state: CounterState | undefined, l: CounterLimit, now: number): CounterState {
  if (l.windowS < 0) {
    const start = monthSpan(state !== undefined && state.start > now ? state.start : now, -l.windowS)[0]
    return { count: state !== undefined && state.start === start ? state.count : 0, start }
  }
  if (l.origin >= 0) {
    const aligned = Math.floor((now - l.origin) / l.windowS) * l.windowS + l.origin
    const start = state !== undefined && state.start > now ? state.start : aligned
    return { count: state !== undefined && state.start === start ? state.count : 0, start }
  }
  if (state !== undefined && now < state.start + l.windowS) return state
  return { count: 0, start: now }
}

export const WINDOW_COUNTER_KIND: LimitKind<CounterLimit, CounterState> = {
  id: 2,
  name: 'window_counter',
  step(state, l, cost, now): Step<CounterState> {
    const w = current(state, l, now)
    const end = windowEnd(l, w.start)
    const next = w.count + cost
    if (next > l.limit + EPSILON) return { allowed: false, value: w.count, retryAfter: secondsTo(end, now), state: w, expireAt: end }
    return { allowed: true, value: next, retryAfter: secondsTo(end, now), state: { count: next, start: w.start }, expireAt: end }
  },
  adjust(state, l, amount, now) {
    const w = current(state, l, now)
    if (w.count === 0 && amount >= 0) return undefined // nothing charged in this window
    const count = Math.max(0, w.count - amount)
    const end = windowEnd(l, w.start)
    return { allowed: true, value: count, retryAfter: secondsTo(end, now), state: { count, start: w.start }, expireAt: end }
  },
  load: (cells, off) => ({ count: cells[off]!, start: cells[off + 1]! }),
  save(s, cells, off) {
    cells[off] = s.count
    cells[off + 1] = s.start
  },
  limit: (p) => counterLimit(p[0]!, p[1]!, p[2]!),
  lua: LUA,
  sql: SQL,
  sample: {
    // A window far longer than the run, counted from the first hit: time steps never cross it.
    params: [
      { min: 1, max: 20, integer: true },
      { min: 3600, max: 3600 },
      { min: -1, max: -1 },
    ],
    drift: () => 0,
    edge: () => Infinity,
  },
}

export function counterLimit(limit: number, windowS: number, origin: number): CounterLimit {
  return { kind: WINDOW_COUNTER_KIND, params: [limit, windowS, origin], limit, windowS, origin }
}
