/**
 * A thread's envoyproxy/ratelimit statistics (grpc/rls-stats.ts) with where
 * they go: /metrics always (observe/rls-prometheus.ts), statsd when
 * USE_STATSD (observe/statsd.ts). One per registry: in a process of one
 * thread the RLS configuration's loads and the calls count into the same;
 * with workers each worker counts its calls and the supervisor the loads,
 * /metrics summing them and each sending its own gains to statsd.
 */
import type { Registry } from 'prom-client'
import { RlsStats } from '../grpc/rls-stats.js'
import type { Settings } from '../settings.js'
import type { Logger } from './logger.js'
import { registerRlsStats } from './rls-prometheus.js'
import { StatsdFlusher } from './statsd.js'

export interface RlsStatsSinks {
  stats: RlsStats
  /** The last gains sent to statsd (when on). */
  close(): Promise<void>
}

const byRegistry = new WeakMap<Registry, RlsStatsSinks>()

export function rlsStatsOf(
  registry: Registry,
  settings: Pick<Settings, 'rlsNearLimitRatio' | 'rlsStatsMaxKeys' | 'rlsStatsd'>,
  log: Logger,
): RlsStatsSinks {
  let sinks = byRegistry.get(registry)
  if (sinks !== undefined) return sinks
  const stats = new RlsStats(settings.rlsNearLimitRatio, settings.rlsStatsMaxKeys)
  registerRlsStats(registry, stats)
  const statsd = settings.rlsStatsd && new StatsdFlusher(settings.rlsStatsd, (send) => stats.drain(send), log)
  sinks = { stats, close: () => statsd?.close() ?? Promise.resolve() }
  byRegistry.set(registry, sinks)
  return sinks
}

/** Where the RLS configuration is read (one thread, or the supervisor): its loads counted, or nothing without one. */
export function rlsLoadsOf(
  registry: Registry,
  settings: Pick<Settings, 'rlsConfig' | 'rlsNearLimitRatio' | 'rlsStatsMaxKeys' | 'rlsStatsd'>,
  log: Logger,
): { loaded(ok: boolean): void; close(): Promise<void> } | undefined {
  if (settings.rlsConfig === undefined) return undefined
  const { stats, close } = rlsStatsOf(registry, settings, log)
  return { loaded: (ok) => stats.count(ok ? 'config_load_success' : 'config_load_error'), close }
}
