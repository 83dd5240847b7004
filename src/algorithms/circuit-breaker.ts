/**
 * circuit_breaker (docs/behaviour.md §5): a policy's spend per minute (the cost of its
 * first rule) on the rate-meter kind; at the threshold the breaker opens and
 * rejects `circuit_breaker_open` until `auto_reset_after_minutes` have passed
 * (0: until the bundle is reloaded or the gateway restarts; the counter key
 * then carries the bundle version, so a reload starts a closed breaker).
 */
import type { HeaderValues, RuleAlgorithm } from './algorithm.js'
import { meterLimit, OPEN_UNTIL_RELOAD_S, type MeterLimit } from './kinds/rate-meter/kind.js'

declare module './algorithm.js' {
  interface RejectReasons {
    circuit_breaker_open: true
  }
}

export interface BreakerConfig extends MeterLimit {
  /** The breaker stays open until a reload or restart. */
  untilReload: boolean
}

export const CIRCUIT_BREAKER: RuleAlgorithm<BreakerConfig> = {
  name: 'circuit_breaker',
  keyPrefix: 'cbr:',
  rejectReason: 'circuit_breaker_open',
  configSchema: {
    type: 'object',
    properties: {
      enabled: { type: 'boolean' },
      spend_rate_threshold_per_minute: { $ref: '#/$defs/positive' },
      action: { enum: ['reject'] },
      auto_reset_after_minutes: { type: 'number', minimum: 0 },
      alert: { type: 'boolean' },
    },
  },
  check(c, out) {
    if (c.enabled === true && typeof c.spend_rate_threshold_per_minute !== 'number')
      out.push({ field: '', message: 'an enabled circuit_breaker needs spend_rate_threshold_per_minute' })
  },
  normalise(c) {
    const minutes = Number(c.auto_reset_after_minutes ?? 0)
    const openS = minutes > 0 ? minutes * 60 : OPEN_UNTIL_RELOAD_S
    return { ...meterLimit(Number(c.spend_rate_threshold_per_minute), openS), untilReload: minutes <= 0 }
  },
  headers(c, _rate, retryAfter, rejected): HeaderValues | undefined {
    return rejected ? { limit: c.threshold, remaining: 0, resetS: retryAfter, windowS: 60 } : undefined
  },
  describe: (c, rate) => `spend rate ${+rate.toFixed(3)}/min (threshold ${c.threshold})`,
}
