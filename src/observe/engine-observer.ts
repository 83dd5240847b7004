/**
 * What the engine and the request path report, turned into log lines and
 * metrics: missing limit keys, shadow would-rejects, store failures (one log
 * line per second with the count, not one per request), charges and each
 * decision's counters.
 */
import type { Decision, EngineObserver } from '../engine/evaluate.js'
import type { Logger } from './logger.js'
import { retryAfterBucket, type Metrics } from './metrics.js'

export function engineObserver(log: Logger, metrics: Metrics, storeKind: string, failPolicy: string, clock: () => number): EngineObserver {
  let lastStoreErrorLog = 0
  let suppressed = 0
  /** Last breaker state seen per policy: a line is logged on each change, not per request. */
  const breakers = new Map<string, boolean>()
  return {
    loopDetected(policy, action) {
      metrics.loopDetected.inc({ policy, action })
    },
    breakerState(policy, open) {
      if (breakers.get(policy) === open) return
      if (open || breakers.has(policy)) log.warn({ event: open ? 'circuit_open' : 'circuit_closed', policy }, open ? 'circuit breaker open: spend rate reached its threshold' : 'circuit breaker closed')
      breakers.set(policy, open)
      metrics.circuitState.set({ target: policy }, open ? 1 : 0)
    },
    descriptorMissing(key, policy, rule) {
      metrics.descriptorMissing.inc({ key })
      log.warn({ key, policy, rule }, 'limit key missing; rule skipped')
    },
    shadowReject(r) {
      metrics.shadowRejects.inc({ policy: r.policyId })
      log.info({ event: 'would_reject', policy: r.policyId, rule: r.ruleName, reason: r.reason, key: r.key }, 'shadow policy would reject')
    },
    storeError(err) {
      metrics.storeErrors.inc({ store: storeKind })
      // During an outage every request fails the same way: one line per second, with the count, not one per request.
      const now = clock()
      suppressed++
      if (now - lastStoreErrorLog < 1000) return
      log.error({ err: { message: err.message, code: (err as { code?: string }).code }, failures: suppressed, failPolicy }, 'store call failed')
      lastStoreErrorLog = now
      suppressed = 0
    },
    limitCharged(policy, cost, value, llm) {
      // An LLM rule's charge is a reservation: what it consumed is counted when it is settled.
      if (!llm) metrics.hot.tokensConsumed.inc(policy, () => ({ policy }), cost)
      metrics.hot.tokensRemaining.set(policy, () => ({ policy }), value)
    },
  }
}

/** Counters and the duration histogram of one decision; `startNs` from process.hrtime.bigint(). */
export function recordDecision(metrics: Metrics, d: Decision, startNs: bigint): void {
  const action = d.allowed ? 'allow' : d.status === 429 ? 'reject' : 'error'
  const policy = d.policyId ?? ''
  metrics.hot.decisions.inc(`${action}|${d.reason}|${policy}`, () => ({ action, reason: d.reason, policy }))
  metrics.decisionDuration.observe(Number(process.hrtime.bigint() - startNs) / 1e9)
  const limit = d.limit
  if (limit) metrics.hot.ratelimitRemaining.set(limit.policyId, () => ({ policy: limit.policyId }), limit.remaining)
  if (d.retryAfterS !== undefined) {
    const bucket = retryAfterBucket(d.retryAfterS)
    metrics.hot.retryAfterBucket.inc(bucket, () => ({ bucket }))
  }
}
