/**
 * Token bucket (limit kind 1), docs/behaviour.md §5: lazy continuous refill,
 * no timers. Pure maths on (state, config, cost, now); the stores call it
 * (or its Lua and PL/pgSQL twins beside this file) atomically. Times are in
 * seconds (float). The `token_bucket` algorithm (algorithms/token-bucket.ts)
 * and the LLM minute bucket run on it.
 *
 * Debt (`maxDelayS` > 0, the third parameter): a request whose tokens are not
 * there yet but arrive within `maxDelayS` is allowed now and the bucket goes
 * below zero, by at most `maxDelayS` × rate. The tokens then stand for time:
 * an allowed outcome's negative value is the wait (−value / rate seconds)
 * before the request's tokens have arrived, which the engine turns into a
 * hold (algorithms/token-bucket.ts advise). The debt lives in the state the
 * stores already keep, so the one atomic call decides it on every store.
 */
import { EPSILON, type Limit, type LimitKind, type Step } from '../../algorithm.js'
import { SQL } from './postgres.js'
import { LUA } from './redis.js'

export interface BucketConfig {
  /** Tokens added per second (`tokens_per_second`, alias `rps`). */
  rate: number
  /** Bucket capacity; a first request sees a full bucket. */
  burst: number
  /** Longest wait a request may be allowed with, in seconds (0: none, every shortfall rejects): the debt allowed is this × rate. */
  maxDelayS?: number
}

export interface BucketState {
  tokens: number
  /** Last refill time in seconds; never moves backwards. */
  last: number
}

export interface BucketResult {
  allowed: boolean
  /** Tokens left after this request (unchanged on reject). */
  tokens: number
  last: number
  /** Seconds until `cost` tokens are available (0 when allowed); with debt, until the request would be allowed with a wait. */
  retryAfter: number
}

/**
 * Epoch seconds as doubles carry ~2.4e-7 s of rounding, so `(t+0.1) - t` can
 * come out as 0.0999999: a client pacing exactly at the rate would be
 * rejected and see one token less in its headers. Clocks tick in whole
 * microseconds (Date.now() in ms, Redis TIME in µs), so rounding the elapsed
 * time to the microsecond recovers it exactly.
 */
function elapsedSeconds(now: number, last: number): number {
  return Math.max(0, Math.round((now - last) * 1e6) / 1e6)
}

/** Token counts within EPSILON of a whole number are that number (sums like 0.7 + 0.2 + 0.1 are not exactly 1). */
function snap(tokens: number): number {
  const r = Math.round(tokens)
  return Math.abs(tokens - r) < EPSILON ? r : tokens
}

export function takeTokens(state: BucketState | undefined, cfg: BucketConfig, cost: number, now: number): BucketResult {
  let tokens: number
  let last: number
  if (state === undefined) {
    tokens = cfg.burst
    last = now
  } else {
    tokens = Math.min(cfg.burst, snap(state.tokens + elapsedSeconds(now, state.last) * cfg.rate))
    last = Math.max(state.last, now)
  }
  // The same expressions, in the same order, as the twins: debt 0 leaves `tokens + 0 >= cost`, the plain bucket.
  const debt = cfg.rate * (cfg.maxDelayS ?? 0)
  if (cost <= cfg.burst && tokens + debt >= cost) {
    return { allowed: true, tokens: snap(tokens - cost), last, retryAfter: 0 }
  }
  return { allowed: false, tokens, last, retryAfter: Math.max(1, Math.ceil((cost - tokens - debt) / cfg.rate - EPSILON)) }
}

/** `RateLimit-Reset`: whole seconds until at least one token is available, at least 1. */
export function resetSeconds(tokens: number, rate: number): number {
  return tokens >= 1 ? 1 : Math.max(1, Math.ceil((1 - tokens) / rate - EPSILON))
}

/** Seconds after `last` at which the bucket is full again, so its state can be forgotten. */
export function secondsUntilFull(tokens: number, cfg: BucketConfig): number {
  return Math.max(0, (cfg.burst - tokens) / cfg.rate)
}

/** A token-bucket limit: params [rate, burst] (and maxDelayS when there is one) for the server scripts. */
export interface BucketLimit extends Limit, BucketConfig {}

/** Refund (amount > 0) or overrun charge (amount < 0) on a bucket: refilled to now first, never above burst, may go negative. */
function adjustBucket(state: BucketState | undefined, cfg: BucketConfig, amount: number, now: number): Step<BucketState> | undefined {
  if (state === undefined && amount >= 0) return undefined // an absent bucket is full: nothing to give back
  const base = state === undefined ? { tokens: cfg.burst, last: now } : takeTokens(state, cfg, 0, now)
  const tokens = Math.min(cfg.burst, snap(base.tokens + amount))
  return {
    allowed: true,
    value: tokens,
    retryAfter: 0,
    state: { tokens, last: base.last },
    expireAt: base.last + secondsUntilFull(tokens, cfg),
  }
}

export const TOKEN_BUCKET_KIND: LimitKind<BucketLimit, BucketState> = {
  id: 1,
  name: 'token_bucket',
  step(state, limit, cost, now) {
    const r = takeTokens(state, limit, cost, now)
    const next = { tokens: r.tokens, last: r.last }
    return {
      allowed: r.allowed,
      value: r.tokens,
      retryAfter: r.retryAfter,
      state: next,
      expireAt: r.last + secondsUntilFull(r.tokens, limit),
    }
  },
  adjust: adjustBucket,
  load: (cells, off) => ({ tokens: cells[off]!, last: cells[off + 1]! }),
  save(s, cells, off) {
    cells[off] = s.tokens
    cells[off + 1] = s.last
  },
  limit: (p) => bucketLimit(p[0]!, p[1]!, p[2] ?? 0),
  lua: LUA,
  sql: SQL,
  sample: {
    params: [
      { min: 0.1, max: 5 },
      { min: 1, max: 20, integer: true },
      // Whole seconds of debt, 0 (the plain bucket) among them: doubles drawn over a range crowd near 0.
      { min: 0, max: 3, integer: true },
    ],
    drift: (l) => l.rate,
    // Tokens before the request (with the debt it may take) against its cost.
    edge: (l, o, cost) => Math.abs((o.allowed ? o.value + cost : o.value) + l.rate * (l.maxDelayS ?? 0) - cost),
  },
}

/** `maxDelayS` 0 keeps the two parameters of a bucket without debt (what the LLM minute bucket and leases compare). */
export function bucketLimit(rate: number, burst: number, maxDelayS = 0): BucketLimit {
  if (maxDelayS > 0) return { kind: TOKEN_BUCKET_KIND, params: [rate, burst, maxDelayS], rate, burst, maxDelayS }
  return { kind: TOKEN_BUCKET_KIND, params: [rate, burst], rate, burst }
}

/** The wait (ms, whole, ≥ 1) before an allowed request that left the bucket at `tokens` < 0 has its tokens; 0 when not in debt. */
export function debtWaitMs(tokens: number, rate: number): number {
  return tokens < 0 ? Math.max(1, Math.ceil((-tokens / rate) * 1000 - EPSILON)) : 0
}
