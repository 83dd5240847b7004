/**
 * token_bucket (docs/behaviour.md §5): a rule's limit on the token-bucket kind
 * (kinds/token-bucket/: its maths in TypeScript, Lua and PL/pgSQL), with
 * opt-in local leases on a remote store (`lease`) and opt-in delay instead of
 * reject (`max_delay_ms`: the kind's debt; an allowed outcome below zero asks
 * for a hold until the request's tokens have arrived).
 */
import { EPSILON, type HeaderValues, type RuleAlgorithm } from './algorithm.js'
import { MAX_DELAY_MS } from './cost-budget.js'
import { bucketLimit, debtWaitMs, resetSeconds, type BucketLimit } from './kinds/token-bucket/kind.js'

declare module './algorithm.js' {
  interface RejectReasons {
    token_bucket_exceeded: true
  }
}

/** A token-bucket rule's limit (with its `lease`, if any), plus its RateLimit-Policy window. */
export interface TokenBucketConfig extends BucketLimit {
  /** burst / rate rounded up. */
  windowS: number
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
      burst: { $ref: '#/$defs/positive', description: 'Capacity; must be >= tokens_per_second unless max_delay_ms is set.' },
      cost_source: { $ref: '#/$defs/costSource' },
      fixed_cost: { $ref: '#/$defs/positive' },
      min_cost: { $ref: '#/$defs/positive', description: 'Smallest cost a header or query parameter can set (default 1).' },
      default_cost: { $ref: '#/$defs/positive', description: 'Used when the cost header/parameter is absent or not a positive number.' },
      max_delay_ms: {
        type: 'integer',
        minimum: 0,
        maximum: MAX_DELAY_MS,
        description:
          'Delay instead of reject: a request whose tokens arrive within this many ms is charged now (the bucket goes into debt) and held until they have arrived (default 0: reject).',
      },
      lease: {
        type: 'object',
        description:
          'Hot keys on a remote store: each gateway instance takes `tokens` at a time from the shared bucket and spends them locally for at most `ttl_ms`. Ignored by the in-process store.',
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
    // With a delay a burst below the rate is a pacer (5/s, burst 1: one request every 200 ms, the others held), not a mistake.
    const paced = typeof c.max_delay_ms === 'number' && c.max_delay_ms > 0
    if (typeof c.burst === 'number' && c.burst < rate && !paced)
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
    // A slice taken into debt would be tokens that do not exist yet, spent at once by the instance holding it.
    if (lease !== undefined && typeof c.max_delay_ms === 'number' && c.max_delay_ms > 0)
      out.push({
        field: 'max_delay_ms',
        message: 'max_delay_ms cannot be combined with lease: a lease hands out tokens the bucket holds now',
      })
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
      ...bucketLimit(rate, burst, Number(c.max_delay_ms ?? 0) / 1000),
      windowS: Math.max(1, Math.ceil(burst / rate - EPSILON)),
      ...(lease ? { lease: { tokens: lease.tokens, ttlMs: lease.ttl_ms } } : {}),
    }
  },
  headers(l, tokens, retryAfter, rejected): HeaderValues {
    if (rejected) return { limit: l.burst, remaining: 0, resetS: retryAfter, windowS: l.windowS }
    // In debt (max_delay_ms) the bucket is below zero: nothing remains.
    return { limit: l.burst, remaining: Math.max(0, Math.floor(tokens)), resetS: resetSeconds(tokens, l.rate), windowS: l.windowS }
  },
  // Below zero only with max_delay_ms: the request waits until its tokens have arrived.
  advise: (l, tokens) => (tokens < 0 ? { delayMs: debtWaitMs(tokens, l.rate), debt: true } : undefined),
  describe: (l, tokens) =>
    tokens < 0 ? `in debt: ${Math.round(-tokens * 1000) / 1000} token(s) owed, ${debtWaitMs(tokens, l.rate)} ms of refill` : undefined,
}
