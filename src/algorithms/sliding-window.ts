/**
 * sliding_window (docs/algorithms.md): at most `limit` (a sum of request
 * costs) in any `window_seconds`, as estimated from two counters by the
 * sliding-window kind (kinds/sliding-window/: its maths in TypeScript, Lua
 * and PL/pgSQL). Costs as token_bucket's. Opt-in delay instead of reject
 * (`max_delay_ms`): a request that fits within that wait is counted now for
 * the instant it fits, and an allowed outcome below zero asks for a hold
 * until then (its wait is the outcome's retryAfter).
 */
import { EPSILON, type HeaderValues, type RuleAlgorithm } from './algorithm.js'
import { MAX_DELAY_MS } from './cost-budget.js'
import { slidingLimit, slidingWaitMs, type SlidingLimit } from './kinds/sliding-window/kind.js'

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
      max_delay_ms: {
        type: 'integer',
        minimum: 0,
        maximum: MAX_DELAY_MS,
        description:
          'Delay instead of reject: a request that fits within this many ms is counted now for the instant it fits and held until then (default 0: reject). Never held past the end of the window after the current one.',
      },
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
    // A held request is counted in the current window or the next: it can never wait two windows.
    if (typeof c.max_delay_ms === 'number' && typeof c.window_seconds === 'number' && c.max_delay_ms > 2000 * c.window_seconds)
      out.push({
        field: 'max_delay_ms',
        message: `max_delay_ms (${c.max_delay_ms}) is above two windows (${2000 * c.window_seconds} ms): a request is never held past the end of the window after the current one, so no wait is that long`,
        warning: true,
      })
  },
  capacity: (l) => l.limit,
  normalise: (c) => slidingLimit(Number(c.limit), Number(c.window_seconds), Number(c.max_delay_ms ?? 0) / 1000),
  headers(l, left, retryAfter, rejected): HeaderValues {
    // Allowed: reset when one more unit fits, at least 1 s (as token_bucket's), for a held request when it is
    // forwarded (its wait, a fraction); rejected: when this request's cost would fit.
    if (rejected) return { limit: l.limit, remaining: 0, resetS: retryAfter, windowS: l.windowS }
    return {
      limit: l.limit,
      remaining: Math.max(0, Math.floor(left + EPSILON)),
      resetS: Math.max(1, Math.ceil(retryAfter - EPSILON)),
      windowS: l.windowS,
    }
  },
  // Below zero only with max_delay_ms: the request is held until it fits.
  advise(_l, left, retryAfter) {
    const delayMs = slidingWaitMs(left, retryAfter)
    return delayMs > 0 ? { delayMs, debt: true } : undefined
  },
  describe(l, left) {
    const est = `estimate ${+(l.limit - left).toFixed(6)}/${l.limit} in the last ${l.windowS} s`
    // Below zero only with max_delay_ms: held requests are counted ahead of the instant they fit.
    return left < -EPSILON ? `${est} (${+(-left).toFixed(6)} over: counted ahead for held requests)` : est
  },
}
