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
import type { StoreFill } from '../store/store.js'

/**
 * What the scrape-time gauges read: the bundle snapshot and the clock. Kept
 * structural so observe/ needs nothing from bundle/.
 */
export interface LiveState {
  bundle(): {
    policies: readonly { shadow: boolean }[]
    killSwitches: readonly { expiresAtMs: number | undefined }[]
    globalShadowUntil: number | undefined
    killSwitchOverrideUntil: number | undefined
  } | null
  nowMs(): number
  /** The in-process store's fill, undefined for shared stores. */
  storeFill?(): StoreFill | undefined
  /** Checks of leased limits decided exactly for want of a lease table cell (this thread's), undefined without leasing. */
  leaseTableFull?(): number | undefined
}

export function createMetrics() {
  const registry = new Registry()
  // Bound by bindLiveState(); until then the override gauges read as off.
  let live: LiveState | undefined
  const activeUntil = (until: number | undefined): number => (until !== undefined && live !== undefined && live.nowMs() < until ? 1 : 0)
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
      help: 'Tokens charged to enforce limits by allowed requests (LLM rules: the settled usage), per policy.',
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
    circuitState: new Gauge({
      name: 'fairvisor_circuit_state',
      help: 'Circuit breaker state per target (0 closed, 1 open).',
      labelNames: ['target'],
      registers: r,
    }),
    // The next four are computed when scraped, from the current bundle and the
    // clock, so an override or kill switch shows as off the moment it expires.
    killSwitchActive: new Gauge({
      name: 'fairvisor_kill_switch_active',
      help: 'Kill switches in the loaded bundle that have not expired.',
      registers: r,
      collect() {
        const b = live?.bundle()
        if (!b) return void this.set(0)
        const now = live!.nowMs()
        let n = 0
        for (const k of b.killSwitches) if (k.expiresAtMs === undefined || now < k.expiresAtMs) n++
        this.set(n)
      },
    }),
    shadowModeActive: new Gauge({
      name: 'fairvisor_shadow_mode_active',
      help: 'Policies running in shadow mode now (all of them while global_shadow is active).',
      registers: r,
      collect() {
        const b = live?.bundle()
        if (!b) return void this.set(0)
        this.set(activeUntil(b.globalShadowUntil) ? b.policies.length : b.policies.filter((p) => p.shadow).length)
      },
    }),
    globalShadowActive: new Gauge({
      name: 'fairvisor_global_shadow_active',
      help: '1 while global_shadow is active.',
      registers: r,
      collect() {
        this.set(activeUntil(live?.bundle()?.globalShadowUntil))
      },
    }),
    killSwitchOverrideActive: new Gauge({
      name: 'fairvisor_kill_switch_override_active',
      help: '1 while kill_switch_override is active.',
      registers: r,
      collect() {
        this.set(activeUntil(live?.bundle()?.killSwitchOverrideUntil))
      },
    }),
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
    // The in-process store never drops a live counter for a new key: the new key's request is refused instead, and counted here.
    storeFull: new Counter({
      name: 'fairvisor_store_full_total',
      help: 'Checks the in-process store refused (503 store_full) because it had no room for a new counter without dropping a live one (FAIRVISOR_SHARED_DICT_SIZE, FAIRVISOR_SHARED_TABLE_SIZE).',
      registers: r,
      collect() {
        const f = live?.storeFill?.()
        if (!f) return
        this.reset()
        this.inc(f.full)
      },
    }),
    storeFill: new Gauge({
      name: 'fairvisor_store_fill_ratio',
      help: 'Bytes charged against FAIRVISOR_SHARED_DICT_SIZE by the in-process store, as a fraction of it.',
      registers: r,
      collect() {
        const f = live?.storeFill?.()
        this.set(f ? f.bytesUsed / f.maxBytes : 0)
      },
    }),
    // More hot keys than the lease table holds: safe (decided exactly) but each costs a store call; visible, not silent.
    leaseTableFull: new Counter({
      name: 'fairvisor_lease_table_full_total',
      help: 'Checks of leased token buckets decided by an exact store call because the lease table had no cell for their key (FAIRVISOR_LEASE_TABLE_KEYS).',
      registers: r,
      collect() {
        const n = live?.leaseTableFull?.()
        if (n === undefined) return
        this.reset()
        this.inc(n)
      },
    }),
  }
  applyWorkerAggregators(registry)
  m.saasReachable.set(0)
  for (const result of ['applied', 'invalid', 'not_monotonic', 'unchanged']) m.reloads.inc({ result }, 0)
  for (const by of ['usage', 'counted', 'reserved', 'refunded', 'dropped']) m.tokenSettlements.inc({ by }, 0)
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
