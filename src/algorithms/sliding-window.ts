/**
 * sliding_window (docs/algorithms.md): at most `limit` (a sum of request
 * costs) in any `window_seconds`, as estimated from two counters by the
 * sliding-window kind (kinds/sliding-window/: its maths in TypeScript, Lua
 * and PL/pgSQL). Costs as token_bucket's.
 */
import { EPSILON, type HeaderValues, type RuleAlgorithm } from './algorithm.js'
import { slidingLimit, type SlidingLimit } from './kinds/sliding-window/kind.js'

declare module './algorithm.js' {
  interface RejectReasons {
    sliding_window_exceeded: true
  }
}

export const SLIDING_WINDOW: RuleAlgorithm<SlidingLimit> = {
  name: 'sliding_window',
  keyPrefix: 'sw:',
  rejectReason: 'sliding_window_exceeded',
  configSchema: {
    type: 'object',
    required: ['limit', 'window_seconds'],
    properties: {
      limit: { $ref: '#/$defs/positive', description: 'Largest sum of request costs in any window_seconds.' },
      window_seconds: { type: 'integer', minimum: 1, maximum: 31_622_400, description: 'Length of the sliding window (at most 366 days).' },
      cost_source: { $ref: '#/$defs/costSource' },
      fixed_cost: { $ref: '#/$defs/positive' },
      min_cost: { $ref: '#/$defs/positive', description: 'Smallest cost a header or query parameter can set (default 1).' },
      default_cost: { $ref: '#/$defs/positive', description: 'Used when the cost header/parameter is absent or not a positive number.' },
    },
  },
  costField: 'cost_source',
  testFigure: 'tokens_left',
  check(c, out) {
    if ((c.cost_source ?? 'fixed') === 'fixed' && typeof c.fixed_cost === 'number' && typeof c.limit === 'number' && c.fixed_cost > c.limit)
      out.push({
        field: 'fixed_cost',
        message: `fixed_cost (${c.fixed_cost}) is above limit (${c.limit}), so every request this rule selects is rejected`,
        warning: true,
      })
  },
  capacity: (l) => l.limit,
  normalise: (c) => slidingLimit(Number(c.limit), Number(c.window_seconds)),
  headers(l, left, retryAfter, rejected): HeaderValues {
    // Allowed: reset when one more unit fits, at least 1 s (as token_bucket's); rejected: when this request's cost would.
    if (rejected) return { limit: l.limit, remaining: 0, resetS: retryAfter, windowS: l.windowS }
    return { limit: l.limit, remaining: Math.max(0, Math.floor(left + EPSILON)), resetS: Math.max(1, retryAfter), windowS: l.windowS }
  },
  describe(l, left) {
    return `estimate ${+(l.limit - left).toFixed(6)}/${l.limit} in the last ${l.windowS} s`
  },
}
