/**
 * envoyproxy/ratelimit's statistics (grpc/rls-stats.ts) on /metrics under the
 * names and labels its statsd-exporter mapping (its default_mapper.yaml)
 * gives them: `ratelimit_service_rate_limit_<stat>{domain, key1[, key2]}`
 * (a key of two levels or more: the first two), `ratelimit_service_config_load_success`,
 * `ratelimit_service_config_load_error` and
 * `ratelimit_service_should_rate_limit_error{err_type}`. Read from the
 * counts when scraped; with workers /metrics sums the threads' (the
 * supervisor's holds the configuration loads).
 */
import { Counter, type Registry } from 'prom-client'
import { RATE_LIMIT_STATS, type RlsStats } from '../grpc/rls-stats.js'

const HELP: Record<(typeof RATE_LIMIT_STATS)[number], string> = {
  total_hits: 'ShouldRateLimit hits of descriptors with a limit (hits_addend each), per domain and descriptor key (envoyproxy/ratelimit).',
  over_limit: 'Hits past the limit, per domain and descriptor key (envoyproxy/ratelimit).',
  near_limit: 'Hits between NEAR_LIMIT_RATIO of the limit and the limit, per domain and descriptor key (envoyproxy/ratelimit).',
  within_limit: 'Hits of descriptors not over their limit, per domain and descriptor key (envoyproxy/ratelimit).',
  shadow_mode: 'Hits past the limit of shadow_mode limits, answered OK, per domain and descriptor key (envoyproxy/ratelimit).',
}

export function registerRlsStats(registry: Registry, stats: RlsStats): void {
  const registers = [registry]
  RATE_LIMIT_STATS.forEach((stat, i) => {
    new Counter({
      name: `ratelimit_service_rate_limit_${stat}`,
      help: HELP[stat],
      labelNames: ['domain', 'key1', 'key2'],
      registers,
      collect() {
        // The totals are kept in stats: set from them afresh at each scrape.
        this.reset()
        for (const s of stats.keys.values()) if (s.counts[i]! > 0) this.inc(s.labels, s.counts[i]!)
      },
    })
  })
  const service = (name: string, help: string, read: () => number) =>
    new Counter({
      name,
      help,
      registers,
      collect() {
        this.reset()
        this.inc(read())
      },
    })
  service(
    'ratelimit_service_config_load_success',
    'RLS configurations loaded (envoyproxy/ratelimit).',
    () => stats.service.config_load_success,
  )
  service(
    'ratelimit_service_config_load_error',
    'RLS configurations refused (envoyproxy/ratelimit).',
    () => stats.service.config_load_error,
  )
  new Counter({
    name: 'ratelimit_service_should_rate_limit_error',
    help: 'ShouldRateLimit calls that failed, by err_type: redis_error (the store failed), service_error (a call refused) (envoyproxy/ratelimit).',
    labelNames: ['err_type'],
    registers,
    collect() {
      this.reset()
      for (const err of ['redis_error', 'service_error'] as const)
        if (stats.service[err] > 0) this.inc({ err_type: err }, stats.service[err])
    },
  })
}
