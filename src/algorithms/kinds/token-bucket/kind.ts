/**
 * Token bucket (limit kind 1), docs/behaviour.md §5: lazy continuous refill,
 * no timers. Pure maths on (state, config, cost, now); the stores call it
 * (or its Lua and PL/pgSQL twins beside this file) atomically. Times are in
 * seconds (float). The `token_bucket` algorithm (algorithms/token-bucket.ts)
 * and the LLM minute bucket run on it.
 */
import { EPSILON, type Limit, type LimitKind, type Step } from '../../algorithm.js'
import { SQL } from './postgres.js'
import { LUA } from './redis.js'

export interface BucketConfig {
  /** Tokens added per second (`tokens_per_second`, alias `rps`). */
  rate: number
  /** Bucket capacity; a first request sees a full bucket. */
  burst: number
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
  /** Seconds until `cost` tokens are available (0 when allowed). */
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
  if (cost <= cfg.burst && tokens >= cost) {
    return { allowed: true, tokens: snap(tokens - cost), last, retryAfter: 0 }
  }
  return { allowed: false, tokens, last, retryAfter: Math.max(1, Math.ceil((cost - tokens) / cfg.rate - EPSILON)) }
}

/** `RateLimit-Reset`: whole seconds until at least one token is available, at least 1. */
export function resetSeconds(tokens: number, rate: number): number {
  return tokens >= 1 ? 1 : Math.max(1, Math.ceil((1 - tokens) / rate - EPSILON))
}

/** Seconds after `last` at which the bucket is full again, so its state can be forgotten. */
export function secondsUntilFull(tokens: number, cfg: BucketConfig): number {
  return Math.max(0, (cfg.burst - tokens) / cfg.rate)
}

/** A token-bucket limit: params [rate, burst] for the server scripts. */
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
  limit: (p) => bucketLimit(p[0]!, p[1]!),
  lua: LUA,
  sql: SQL,
  sample: {
    params: [
      { min: 0.1, max: 5 },
      { min: 1, max: 20, integer: true },
    ],
    drift: (l) => l.rate,
    // Tokens before the request against its cost.
    edge: (_l, o, cost) => Math.abs((o.allowed ? o.value + cost : o.value) - cost),
  },
}

export function bucketLimit(rate: number, burst: number): BucketLimit {
  return { kind: TOKEN_BUCKET_KIND, params: [rate, burst], rate, burst }
}
