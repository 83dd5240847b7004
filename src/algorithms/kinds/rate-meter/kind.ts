/**
 * Rate meter (limit kind 3), the circuit breaker's counter: spend per minute,
 * estimated as the previous minute weighted by the part of it still inside a
 * sliding 60 s window plus the current minute (docs/behaviour.md §5). When a request would
 * bring the rate to the threshold, the meter opens: that request and every
 * other one is rejected until `openS` seconds have passed. Opening is a state
 * change that is committed although the request is rejected (`commit`).
 * Opening clears the measured spend, so once the open period is over the
 * meter measures afresh instead of re-opening on the spike it already acted
 * on. Pure; times in seconds. Its Lua and PL/pgSQL twins are beside this file.
 */
import { EPSILON, type Limit, type LimitKind, type Step } from '../../algorithm.js'
import { SQL } from './postgres.js'
import { LUA } from './redis.js'

export interface MeterLimit extends Limit {
  /** Spend per minute at which the meter opens. */
  threshold: number
  /** How long it stays open, in seconds. */
  openS: number
}

export interface MeterState {
  prev: number
  cur: number
  /** Start of the current minute (epoch seconds, a multiple of 60). */
  minute: number
  /** Open until this time (0: closed). */
  openUntil: number
}

export const METER_KIND: LimitKind<MeterLimit, MeterState> = {
  id: 3,
  name: 'rate_meter',
  step(state, l, cost, now): Step<MeterState> {
    if (state !== undefined && state.openUntil > now) {
      return {
        allowed: false,
        value: l.threshold,
        retryAfter: Math.max(1, Math.ceil(state.openUntil - now - EPSILON)),
        state,
        expireAt: state.openUntil,
      }
    }
    let minute = Math.floor(now / 60) * 60
    let prev = 0
    let cur = 0
    // A stored minute after now's is the current one: a clock behind the one that wrote it (a
    // stepped-back host clock, another database node, a fail-over replica) never resets the spend.
    if (state !== undefined && state.minute >= minute) {
      minute = state.minute
      prev = state.prev
      cur = state.cur
    } else if (state !== undefined && state.minute === minute - 60) prev = state.cur
    const rate = prev * (1 - Math.max(0, now - minute) / 60) + cur + cost
    if (rate >= l.threshold - EPSILON) {
      const openUntil = now + l.openS
      const opened = { prev: 0, cur: 0, minute, openUntil }
      return {
        allowed: false,
        value: rate,
        retryAfter: Math.max(1, Math.ceil(l.openS - EPSILON)),
        state: opened,
        expireAt: Math.max(openUntil, minute + 120),
        commit: true,
      }
    }
    return { allowed: true, value: rate, retryAfter: 0, state: { prev, cur: cur + cost, minute, openUntil: 0 }, expireAt: minute + 120 }
  },
  /** Give back spend of the current minute (a cluster refund); older minutes are left as measured. */
  adjust(state, _l, amount, now) {
    if (state === undefined || state.minute < Math.floor(now / 60) * 60) return undefined
    const next = { ...state, cur: Math.max(0, state.cur - amount) }
    return { allowed: true, value: next.cur, retryAfter: 0, state: next, expireAt: Math.max(next.openUntil, next.minute + 120) }
  },
  load: (cells, off) => ({ prev: cells[off]!, cur: cells[off + 1]!, minute: cells[off + 2]!, openUntil: cells[off + 3]! }),
  save(s, cells, off) {
    cells[off] = s.prev
    cells[off + 1] = s.cur
    cells[off + 2] = s.minute
    cells[off + 3] = s.openUntil
  },
  limit: (p) => meterLimit(p[0]!, p[1]!),
  lua: LUA,
  sql: SQL,
  sample: {
    params: [
      { min: 2, max: 30, integer: true },
      { min: 600, max: 600 },
    ],
    // The last minute's spend decays over the minute: at most threshold / 60 per second.
    drift: (l) => l.threshold / 60,
    edge: (l, o) => Math.abs(o.value - l.threshold),
  },
}

/** `openS` of a breaker that stays open until a reload or restart: 100 years. */
export const OPEN_UNTIL_RELOAD_S = 100 * 365 * 86_400

export function meterLimit(threshold: number, openS: number): MeterLimit {
  return { kind: METER_KIND, params: [threshold, openS], threshold, openS }
}
