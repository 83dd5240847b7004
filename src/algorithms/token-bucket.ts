/**
 * Token bucket, docs/behaviour.md §5: lazy continuous refill, no timers. Pure maths on
 * (state, config, cost, now); the stores call it (or its Lua twin) atomically.
 * Times are in seconds (float). Also the `token_bucket` algorithm and limit
 * kind on the seam of algorithm.ts.
 */
import { EPSILON, type HeaderValues, type RuleAlgorithm, type Limit, type LimitKind, type Step } from './algorithm.js'

declare module './algorithm.js' {
  interface RejectReasons {
    token_bucket_exceeded: true
  }
}
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
}

export function bucketLimit(rate: number, burst: number): BucketLimit {
  return { kind: TOKEN_BUCKET_KIND, params: [rate, burst], rate, burst }
}

/** Local token leases on a shared store (store/leasing.ts): slice size and lifetime. */
export interface LeaseConfig {
  tokens: number
  ttlMs: number
}

/** A token-bucket rule's limit, plus its RateLimit-Policy window. */
export interface TokenBucketConfig extends BucketLimit {
  /** burst / rate rounded up. */
  windowS: number
  lease?: LeaseConfig
}

export const TOKEN_BUCKET: RuleAlgorithm<TokenBucketConfig> = {
  name: 'token_bucket',
  keyPrefix: 'tb:',
  rejectReason: 'token_bucket_exceeded',
  configSchema: {
    type: 'object',
    required: ['burst'],
    anyOf: [{ required: ['tokens_per_second'] }, { required: ['rps'] }],
    properties: {
      tokens_per_second: { $ref: '#/$defs/positive', description: 'Refill rate.' },
      rps: { $ref: '#/$defs/positive', description: 'Alias of tokens_per_second.' },
      burst: { $ref: '#/$defs/positive', description: 'Capacity; must be >= tokens_per_second.' },
      cost_source: { $ref: '#/$defs/costSource' },
      fixed_cost: { $ref: '#/$defs/positive' },
      min_cost: { $ref: '#/$defs/positive', description: 'Smallest cost a header or query parameter can set (default 1).' },
      default_cost: { $ref: '#/$defs/positive', description: 'Used when the cost header/parameter is absent or not a positive number.' },
      lease: {
        type: 'object',
        description:
          'Hot keys on a shared store: each gateway instance takes `tokens` at a time from the shared bucket and spends them locally for at most `ttl_ms`. Ignored by the in-process store.',
        required: ['tokens', 'ttl_ms'],
        additionalProperties: false,
        properties: {
          tokens: { type: 'integer', minimum: 2, maximum: 100000 },
          ttl_ms: { type: 'integer', minimum: 10, maximum: 60000 },
        },
      },
    },
  },
  costField: 'cost_source',
  testFigure: 'tokens_left',
  check(c, out) {
    const rate = (c.tokens_per_second ?? c.rps) as number
    if (typeof c.burst === 'number' && c.burst < rate)
      out.push({ field: 'burst', message: `burst (${c.burst}) must be at least tokens_per_second (${rate})` })
    else if (
      (c.cost_source ?? 'fixed') === 'fixed' &&
      typeof c.fixed_cost === 'number' &&
      typeof c.burst === 'number' &&
      c.fixed_cost > c.burst
    ) {
      out.push({
        field: 'fixed_cost',
        message: `fixed_cost (${c.fixed_cost}) is above burst (${c.burst}), so every request this rule selects is rejected`,
        warning: true,
      })
    }
    const lease = c.lease as { tokens?: unknown } | undefined
    if (typeof lease?.tokens === 'number' && typeof c.burst === 'number' && lease.tokens >= c.burst) {
      out.push({
        field: 'lease/tokens',
        message: `lease.tokens (${lease.tokens}) is not below burst (${c.burst}): a slice only fits a full bucket, so the rule is decided by one store call per request most of the time; use a slice well below burst`,
        warning: true,
      })
    }
  },
  capacity: (l) => l.burst,
  normalise(c) {
    const rate = Number(c.tokens_per_second ?? c.rps ?? 1)
    const burst = Number(c.burst ?? rate)
    const lease = c.lease as { tokens: number; ttl_ms: number } | undefined
    // The epsilon keeps float noise (3 / 0.3 = 10.000000000000002) from adding a second.
    return {
      ...bucketLimit(rate, burst),
      windowS: Math.max(1, Math.ceil(burst / rate - EPSILON)),
      ...(lease ? { lease: { tokens: lease.tokens, ttlMs: lease.ttl_ms } } : {}),
    }
  },
  headers(l, tokens, retryAfter, rejected): HeaderValues {
    if (rejected) return { limit: l.burst, remaining: 0, resetS: retryAfter, windowS: l.windowS }
    return { limit: l.burst, remaining: Math.floor(tokens), resetS: resetSeconds(tokens, l.rate), windowS: l.windowS }
  },
}
