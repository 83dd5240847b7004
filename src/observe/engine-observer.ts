/**
 * What the engine and the request path report, turned into log lines and
 * metrics: missing limit keys, shadow would-rejects, store failures (one log
 * line per second with the count, not one per request), tokens that fail
 * verification, charges and each decision's counters.
 */
import type { Decision, EngineObserver } from '../engine/decision.js'
import type { JwtRejectReason } from '../request/jwt-verify.js'
import { LogThrottle } from './log-throttle.js'
import type { Logger } from './logger.js'
import type { Metrics } from './metrics.js'

/** fairvisor_retry_after_bucket_total labels: fixed ranges, so the label set stays bounded whatever Retry-After is. */
const RETRY_AFTER_BUCKETS = [
  [1, 'le_1'],
  [5, 'le_5'],
  [10, 'le_10'],
  [30, 'le_30'],
  [60, 'le_60'],
  [300, 'le_300'],
  [900, 'le_900'],
  [3600, 'le_3600'],
] as const

function retryAfterBucket(seconds: number): string {
  for (const [le, name] of RETRY_AFTER_BUCKETS) if (seconds <= le) return name
  return 'gt_3600'
}

export function engineObserver(log: Logger, metrics: Metrics, storeKind: string, failPolicy: string, clock: () => number): EngineObserver {
  const storeErrors = new LogThrottle(clock)
  /** Per limit-key name (a bounded set: the bundle's). */
  const missing = new Map<string, LogThrottle>()
  /** Last breaker state seen per policy: a line is logged on each change, not per request. */
  const breakers = new Map<string, boolean>()
  return {
    loopDetected(policy, action) {
      metrics.loopDetected.inc({ policy, action })
    },
    breakerState(policy, open) {
      if (breakers.get(policy) === open) return
      if (open || breakers.has(policy))
        log.warn(
          { event: open ? 'circuit_open' : 'circuit_closed', policy },
          open ? 'circuit breaker open: spend rate reached its threshold' : 'circuit breaker closed',
        )
      breakers.set(policy, open)
      metrics.circuitState.set({ target: policy }, open ? 1 : 0)
    },
    descriptorMissing(key, policy, rule) {
      metrics.descriptorMissing.inc({ key })
      // A flood of garbage tokens must not become a flood of lines: one per second per key, with the count.
      let t = missing.get(key)
      if (t === undefined) missing.set(key, (t = new LogThrottle(clock)))
      const n = t.hit()
      if (n > 0)
        log.warn(
          { key, policy, rule, requests: n },
          'limit key missing; rule skipped (fail-open; counted in fairvisor_descriptor_missing_total)',
        )
    },
    shadowReject(r) {
      metrics.shadowRejects.inc({ policy: r.policyId })
      log.info({ event: 'would_reject', policy: r.policyId, rule: r.ruleName, reason: r.reason, key: r.key }, 'shadow policy would reject')
    },
    storeError(err) {
      metrics.storeErrors.inc({ store: storeKind })
      if (failPolicy === 'open') metrics.storeFailOpen.inc({ store: storeKind })
      // During an outage every request fails the same way: one line per second, with the count, not one per request.
      const n = storeErrors.hit()
      if (n > 0)
        log.error({ err: { message: err.message, code: (err as { code?: string }).code }, failures: n, failPolicy }, 'store call failed')
    },
    limitCharged(policy, cost, value, settledLater) {
      // An LLM rule's charge, or one a response status settles, is a reservation: what it consumed is counted when it is settled.
      if (!settledLater) metrics.hot.tokensConsumed.inc(policy, () => ({ policy }), cost)
      metrics.hot.tokensRemaining.set(policy, () => ({ policy }), value)
    },
  }
}

/**
 * Bearer tokens that failed verification: counted per request in fairvisor_jwt_rejected_total
 * and logged at most once every 10 s per reason, with how many came. Without this the only trace
 * was the `jwt:` key missing, and "why is my paid user on the free limit?" had no answer. A flood
 * of forged tokens costs a line per reason per interval. A key set that cannot be fetched is the
 * operator's to fix (every token fails), so it is an error; the others are clients' tokens.
 */
export function jwtRejections(log: Logger, metrics: Metrics, clock: () => number): (reason: JwtRejectReason, detail: string) => void {
  const throttles = new Map<JwtRejectReason, LogThrottle>()
  return (reason, detail) => {
    metrics.jwtRejected.inc({ reason })
    let t = throttles.get(reason)
    if (t === undefined) throttles.set(reason, (t = new LogThrottle(clock, 10_000)))
    const n = t.hit()
    if (n > 0)
      log[reason === 'jwks_unavailable' ? 'error' : 'warn'](
        { event: 'jwt_rejected', reason, detail, requests: n },
        'bearer token failed verification: its jwt: claims are not read (counted in fairvisor_jwt_rejected_total)',
      )
  }
}

/**
 * What each decision records: metrics, and with FAIRVISOR_LOG_LEVEL=debug one
 * line (policy, rule, counter key, cost, outcome, duration). The level is
 * fixed at start, so at info the hot path pays one boolean test.
 */
export function decisionRecorder(metrics: Metrics, log: Logger): (d: Decision, startNs: bigint) => void {
  if (!log.isLevelEnabled('debug')) return (d, startNs) => recordDecision(metrics, d, startNs)
  return (d, startNs) => {
    recordDecision(metrics, d, startNs)
    const durationUs = Number((process.hrtime.bigint() - startNs) / 1000n)
    log.debug(
      {
        event: 'decision',
        outcome: d.allowed ? 'allow' : d.status === 503 ? 'error' : 'reject',
        reason: d.reason,
        policy: d.policyId,
        rule: d.ruleName,
        key: d.key,
        cost: d.cost,
        mode: d.mode,
        durationUs,
      },
      'decision',
    )
  }
}

/** Label sets by their one value, made once a key is first seen (module-level: no closure per decision). */
const policyLabel = (policy: string): { policy: string } => ({ policy })
const bucketLabel = (bucket: string): { bucket: string } => ({ bucket })

/** Counters and the duration histogram of one decision; `startNs` from process.hrtime.bigint(). */
function recordDecision(metrics: Metrics, d: Decision, startNs: bigint): void {
  const action = d.allowed ? 'allow' : d.status === 503 ? 'error' : 'reject'
  metrics.hot.decisions.inc(action, d.reason, d.policyId ?? '')
  metrics.decisionDuration.observe(Number(process.hrtime.bigint() - startNs) / 1e9)
  const limit = d.limit
  if (limit) metrics.hot.ratelimitRemaining.set(limit.policyId, policyLabel, limit.remaining)
  if (d.retryAfterS !== undefined) metrics.hot.retryAfterBucket.inc(retryAfterBucket(d.retryAfterS), bucketLabel)
}

/** A warning for an event that can come per request: at most one line every 10 s, with how many came (`countField`). */
function throttledWarning(log: Logger, clock: () => number, countField: string, msg: string): () => void {
  const t = new LogThrottle(clock, 10_000)
  return () => {
    const n = t.hit()
    if (n > 0) log.warn({ [countField]: n }, msg)
  }
}

/** Checks the in-process store refused for want of room, logged at most every 10 s with their count. */
export function storeFullLog(log: Logger, clock: () => number): () => void {
  return throttledWarning(
    log,
    clock,
    'requests',
    'in-process store full: new limit keys refused (503 store_full), live counters are never dropped for them (a flood of new limit keys?); see fairvisor_store_full_total and FAIRVISOR_SHARED_DICT_SIZE / FAIRVISOR_SHARED_TABLE_SIZE',
  )
}

/** The lease table had no cell for a hot key: a throttled warning (the request itself is decided exactly, which is safe). */
export function leaseTableFullLog(log: Logger, clock: () => number): () => void {
  return throttledWarning(
    log,
    clock,
    'requests',
    'lease table full: requests on leased limits decided by an exact store call (more hot keys than cells?); see fairvisor_lease_table_full_total and FAIRVISOR_LEASE_TABLE_KEYS',
  )
}

/** A concurrency slot's give-back or renewal the store failed: counted as a store error, logged at most once a second with the count. */
export function slotsDropped(log: Logger, metrics: Metrics, storeKind: string, clock: () => number): (err: Error) => void {
  const t = new LogThrottle(clock)
  return (err) => {
    metrics.storeErrors.inc({ store: storeKind })
    const n = t.hit()
    if (n > 0)
      log.error(
        { event: 'concurrency_slot_dropped', err: { message: err.message }, slots: n },
        'store unavailable: concurrency slot give-back or renewal dropped; the slot frees at its lease end',
      )
  }
}
