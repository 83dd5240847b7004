/**
 * Prometheus metrics (docs/behaviour.md §10) on a private prom-client registry. Every name
 * exists from start-up. Label values are bounded: actions, reasons, policy
 * ids and descriptor key names come from the bundle or from fixed lists,
 * never from traffic (no paths, no limit-key values).
 * With several worker threads /metrics sums the workers' registries
 * (workers/supervisor.ts), except the metrics worker-metrics.ts names.
 */
import { Counter, Gauge, Histogram, Registry } from 'prom-client'
import { DeferredCounter, DeferredCounter3, DeferredGauge, FastHistogram } from './hot-metrics.js'
import { applyWorkerAggregators } from './worker-metrics.js'
import { bundleGauges, slotGauges, storeGauges, type LiveState } from './live-gauges.js'
import { JWT_REJECT_REASONS } from '../request/jwt-verify.js'

export function createMetrics() {
  const registry = new Registry()
  // Bound by bindLiveState(); until then the override gauges read as off.
  let live: LiveState | undefined
  const r = [registry]
  const m = {
    registry,
    /** Connect the scrape-time gauges to the bundle source and the clock (main.ts). */
    bindLiveState(state: LiveState): void {
      live = state
    },
    decisions: new Counter({
      name: 'fairvisor_decisions_total',
      help: 'Decisions by action, reason and policy.',
      labelNames: ['action', 'reason', 'policy'],
      registers: r,
    }),
    decisionDuration: new FastHistogram(
      'fairvisor_decision_duration_seconds',
      'Time to decide one request, store call included.',
      [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1],
      registry,
    ),
    ratelimitRemaining: new Gauge({
      name: 'fairvisor_ratelimit_remaining',
      help: 'RateLimit-Remaining of the last decision per policy.',
      labelNames: ['policy'],
      registers: r,
    }),
    tokensConsumed: new Counter({
      name: 'fairvisor_tokens_consumed_total',
      help: 'Tokens charged to enforce limits by allowed requests (LLM rules: the settled usage; rules with count_statuses / refund_statuses: the charges their response kept), per policy.',
      labelNames: ['policy'],
      registers: r,
    }),
    tokensRemaining: new Gauge({
      name: 'fairvisor_tokens_remaining',
      help: 'Tokens left in the bucket of the last enforce limit charged, per policy.',
      labelNames: ['policy'],
      registers: r,
    }),
    tokenEstimationAccuracy: new Histogram({
      name: 'fairvisor_token_estimation_accuracy_ratio',
      help: 'LLM prompt tokens reported by the provider divided by the estimate made before the call.',
      buckets: [0.25, 0.5, 0.75, 0.9, 0.95, 1, 1.05, 1.1, 1.25, 1.5, 2, 4],
      labelNames: ['estimator'],
      registers: r,
    }),
    tokenReservationUnused: new Counter({
      name: 'fairvisor_token_reservation_unused_total',
      help: 'LLM tokens reserved before a call and given back at settlement, per policy.',
      labelNames: ['policy'],
      registers: r,
    }),
    tokenSettlements: new Counter({
      name: 'fairvisor_token_settlements_total',
      help: 'LLM reservations settled, by what they were settled on (usage, counted, reserved, refunded, dropped).',
      labelNames: ['by'],
      registers: r,
    }),
    llmSpend: new Counter({
      name: 'fairvisor_llm_spend_micros_total',
      help: 'Money spent by LLM calls as money budgets settled it (cost_key llm_price), in micros (millionths) of the currency, per policy and currency (a call two budgets of one policy price counts in each).',
      labelNames: ['policy', 'currency'],
      registers: r,
    }),
    llmSpendSettlements: new Counter({
      name: 'fairvisor_llm_spend_settlements_total',
      help: 'Money budget reservations settled, by what they were settled on (usage, counted, reserved, refunded, dropped).',
      labelNames: ['by'],
      registers: r,
    }),
    llmStreamCuts: new Counter({
      name: 'fairvisor_llm_stream_cuts_total',
      help: 'LLM streams the gateway ended, by reason (max_completion_tokens, event_too_large, unreadable).',
      labelNames: ['reason'],
      registers: r,
    }),
    loopDetected: new Counter({
      name: 'fairvisor_loop_detected_total',
      help: 'Requests flagged by loop detection, per policy and action (reject, throttle, warn).',
      labelNames: ['policy', 'action'],
      registers: r,
    }),
    delayed: new Counter({
      name: 'fairvisor_delayed_requests_total',
      help: 'Requests in debt (a token_bucket or sliding_window with max_delay_ms) by how their hold ended: forwarded, abandoned (the client left; charges given back) or refused (FAIRVISOR_MAX_DELAYED reached: rejected, charges given back), per policy.',
      labelNames: ['policy', 'result'],
      registers: r,
    }),
    delaySeconds: new Histogram({
      name: 'fairvisor_delay_seconds',
      help: 'How long each request in debt (max_delay_ms) was to be held, per policy.',
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      labelNames: ['policy'],
      registers: r,
    }),
    delayedHeld: new Gauge({
      name: 'fairvisor_delayed_held',
      help: 'Requests the process holds for their debt now, against FAIRVISOR_MAX_DELAYED.',
      registers: r,
      collect() {
        this.set(live?.delayedHeld?.() ?? 0)
      },
    }),
    statusRefunds: new Counter({
      name: 'fairvisor_status_refunds_total',
      help: 'Charges given back after the response by its status: rules with count_statuses (a status not counted) or refund_statuses (a status refunded), per policy.',
      labelNames: ['policy'],
      registers: r,
    }),
    circuitState: new Gauge({
      name: 'fairvisor_circuit_state',
      help: 'Circuit breaker state per target (0 closed, 1 open).',
      labelNames: ['target'],
      registers: r,
    }),
    ...bundleGauges(r, () => live),
    saasReachable: new Gauge({
      name: 'fairvisor_saas_reachable',
      help: 'Always 0: this gateway runs without a SaaS control plane.',
      registers: r,
    }),
    saasCalls: new Counter({
      name: 'fairvisor_saas_calls_total',
      help: 'Always 0: this gateway runs without a SaaS control plane.',
      registers: r,
    }),
    eventsSent: new Counter({
      name: 'fairvisor_events_sent_total',
      help: 'Always 0: this gateway sends no events to a control plane.',
      registers: r,
    }),
    configInfo: new Gauge({
      name: 'fairvisor_config_info',
      help: 'Loaded bundle version and hash (value 1).',
      labelNames: ['version', 'hash'],
      registers: r,
    }),
    buildInfo: new Gauge({
      name: 'fairvisor_build_info',
      help: 'Gateway version (value 1).',
      labelNames: ['version'],
      registers: r,
    }),
    descriptorMissing: new Counter({
      name: 'fairvisor_descriptor_missing_total',
      help: 'Rules skipped because a limit key was missing, by key name.',
      labelNames: ['key'],
      registers: r,
    }),
    jwtRejected: new Counter({
      name: 'fairvisor_jwt_rejected_total',
      help: 'Requests whose bearer token failed verification (its jwt: claims unread), by reason.',
      labelNames: ['reason'],
      registers: r,
    }),
    retryAfterBucket: new Counter({
      name: 'fairvisor_retry_after_bucket_total',
      help: 'Rejects by Retry-After range.',
      labelNames: ['bucket'],
      registers: r,
    }),
    shadowRejects: new Counter({
      name: 'fairvisor_shadow_would_reject_total',
      help: 'Would-be rejects of shadow policies.',
      labelNames: ['policy'],
      registers: r,
    }),
    reloads: new Counter({
      name: 'fairvisor_config_reload_total',
      help: 'Bundle loads by result (unchanged: the bytes in force, read again).',
      labelNames: ['result'],
      registers: r,
    }),
    storeErrors: new Counter({
      name: 'fairvisor_store_errors_total',
      help: 'Store calls that failed or missed their deadline.',
      labelNames: ['store'],
      registers: r,
    }),
    storeFailOpen: new Counter({
      name: 'fairvisor_store_fail_open_total',
      help: 'Requests let through without a limit check because the store call failed (FAIRVISOR_FAIL_POLICY=open).',
      labelNames: ['store'],
      registers: r,
    }),
    ...storeGauges(r, () => live),
    ...slotGauges(r, () => live),
  }
  applyWorkerAggregators(registry)
  m.saasReachable.set(0)
  for (const result of ['applied', 'invalid', 'not_monotonic', 'unchanged']) m.reloads.inc({ result }, 0)
  for (const by of ['usage', 'counted', 'reserved', 'refunded', 'dropped']) {
    m.tokenSettlements.inc({ by }, 0)
    m.llmSpendSettlements.inc({ by }, 0)
  }
  for (const reason of JWT_REJECT_REASONS) m.jwtRejected.inc({ reason }, 0)
  // Per-request updates go through these (see hot-metrics.ts); the rest are rare events.
  const hot = {
    decisions: new DeferredCounter3(m.decisions, ['action', 'reason', 'policy']),
    retryAfterBucket: new DeferredCounter(m.retryAfterBucket),
    ratelimitRemaining: new DeferredGauge(m.ratelimitRemaining),
    tokensConsumed: new DeferredCounter(m.tokensConsumed),
    tokensRemaining: new DeferredGauge(m.tokensRemaining),
  }
  return { ...m, hot }
}

export type Metrics = ReturnType<typeof createMetrics>
