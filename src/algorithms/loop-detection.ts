/**
 * loop_detection (docs/behaviour.md §5): identical requests (same method, normalised path,
 * sorted query and descriptor values: the fingerprint, built by the engine)
 * counted in a window that starts at the first one, on the window-counter
 * kind. At `count ≥ threshold`: reject (`loop_detected`), or throttle by
 * count × 100 ms (cap 30 s), or warn. With reject the store itself refuses
 * the threshold-th request, so a looping client cannot get past it by racing.
 */
import type { Advice, HeaderValues, RuleAlgorithm } from './algorithm.js'
import { MAX_DELAY_MS } from './cost-budget.js'
import { counterLimit, type CounterLimit } from './kinds/window-counter/kind.js'

declare module './algorithm.js' {
  interface RejectReasons {
    loop_detected: true
  }
}

/** Stands for "no limit" in the store (kept finite: server scripts parse it as a number). */
const UNLIMITED = 1e15

export interface LoopConfig extends CounterLimit {
  threshold: number
  action: 'reject' | 'throttle' | 'warn'
}

export const LOOP_DETECTION: RuleAlgorithm<LoopConfig> = {
  name: 'loop_detection',
  keyPrefix: 'loop:',
  rejectReason: 'loop_detected',
  configSchema: {
    type: 'object',
    properties: {
      enabled: { type: 'boolean' },
      window_seconds: { $ref: '#/$defs/positiveInteger' },
      threshold_identical_requests: { type: 'integer', minimum: 2 },
      action: { enum: ['reject', 'throttle', 'warn'] },
      similarity: { enum: ['exact'] },
    },
  },
  check(c, out) {
    if (c.enabled === true && (typeof c.window_seconds !== 'number' || typeof c.threshold_identical_requests !== 'number'))
      out.push({ field: '', message: 'an enabled loop_detection needs window_seconds and threshold_identical_requests' })
  },
  normalise(c) {
    const threshold = Number(c.threshold_identical_requests ?? 10)
    const action = (c.action ?? 'reject') as LoopConfig['action']
    const windowS = Number(c.window_seconds ?? 60)
    return { ...counterLimit(action === 'reject' ? threshold - 1 : UNLIMITED, windowS, -1), threshold, action }
  },
  headers(c, _count, retryAfter, rejected): HeaderValues | undefined {
    return rejected ? { limit: c.threshold, remaining: 0, resetS: retryAfter, windowS: c.windowS } : undefined
  },
  advise(c, count): Advice | undefined {
    if (count < c.threshold) return undefined
    return { warning: 'loop_detected', delayMs: c.action === 'throttle' ? Math.min(MAX_DELAY_MS, count * 100) : 0, loop: true }
  },
  describe: (c, count) => `identical requests ${count} in the window (threshold ${c.threshold}, ${c.action})`,
}
