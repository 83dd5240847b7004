/**
 * How /metrics combines one metric over the worker threads. With several
 * workers the supervisor merges every worker's registry and its own
 * (workers/supervisor.ts) by each metric's `aggregator`. prom-client sums by
 * default, which is right for what each worker counts on its own traffic
 * (decisions, tokens, store errors, durations). The metrics below state one
 * view or one process-wide fact instead: summing would multiply it by the
 * number of registries.
 */
import type { Aggregator, Registry } from 'prom-client'

export const WORKER_AGGREGATORS: Readonly<Record<string, Aggregator>> = {
  // The last decision's headroom: the tightest worker's figure is the one a client meets next.
  fairvisor_ratelimit_remaining: 'min',
  fairvisor_tokens_remaining: 'min',
  // A circuit open in any worker is open for the traffic that reaches it.
  fairvisor_circuit_state: 'max',
  // Every registry reads the same bundle and clock.
  fairvisor_kill_switch_active: 'max',
  fairvisor_shadow_mode_active: 'max',
  fairvisor_global_shadow_active: 'max',
  fairvisor_kill_switch_override_active: 'max',
  fairvisor_saas_reachable: 'max',
  fairvisor_config_info: 'max',
  fairvisor_build_info: 'max',
  // The in-process table is shared by the workers: each reads the same fill and refusal count.
  fairvisor_store_full_total: 'max',
  fairvisor_store_fill_ratio: 'max',
  // The held requests are counted once for the process (decision/hold-slots.ts): each worker reads the same total.
  fairvisor_delayed_held: 'max',
}

/** Give every metric named above its aggregator (createMetrics, once its metrics are registered). */
export function applyWorkerAggregators(registry: Registry): void {
  for (const metric of registry.getMetricsAsArray()) {
    const aggregator = WORKER_AGGREGATORS[metric.name]
    if (aggregator !== undefined) metric.aggregator = aggregator
  }
}
