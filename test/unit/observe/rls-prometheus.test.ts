/**
 * envoyproxy/ratelimit's statistics on /metrics under the names and labels
 * its statsd-exporter mapping (src/stats/prom/default_mapper.yaml) gives
 * them: a key of two levels as `{domain, key1}`, of more as
 * `{domain, key1, key2}`; the configuration loads and call errors. The
 * registry's text as a scrape reads it, after counts and again after more.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Registry } from 'prom-client'
import { RlsStats } from '../../../src/grpc/rls-stats.js'
import { registerRlsStats } from '../../../src/observe/rls-prometheus.js'

/** The sample lines of `text`, without HELP/TYPE. */
const samples = (text: string): string[] => text.split('\n').filter((l) => l !== '' && !l.startsWith('#'))

test("upstream's names and labels, exact totals at every scrape", async () => {
  const registry = new Registry()
  const stats = new RlsStats(0.8, 10)
  registerRlsStats(registry, stats)
  // Before anything: the label-less counters at 0, no other series.
  assert.deepEqual(samples(await registry.metrics()), ['ratelimit_service_config_load_success 0', 'ratelimit_service_config_load_error 0'])
  const two = stats.keyStats('d.k_v')
  const three = stats.keyStats('d.a.b_c.e')
  two.counts.splice(0, 5, 7, 2, 1, 5, 0)
  three.counts.splice(0, 5, 3, 0, 0, 3, 0)
  stats.count('config_load_success')
  stats.count('config_load_error')
  stats.count('redis_error')
  const first = samples(await registry.metrics())
  assert.deepEqual(first.sort(), [
    'ratelimit_service_config_load_error 1',
    'ratelimit_service_config_load_success 1',
    'ratelimit_service_rate_limit_near_limit{domain="d",key1="k_v"} 1',
    'ratelimit_service_rate_limit_over_limit{domain="d",key1="k_v"} 2',
    'ratelimit_service_rate_limit_total_hits{domain="d",key1="a",key2="b_c"} 3',
    'ratelimit_service_rate_limit_total_hits{domain="d",key1="k_v"} 7',
    'ratelimit_service_rate_limit_within_limit{domain="d",key1="a",key2="b_c"} 3',
    'ratelimit_service_rate_limit_within_limit{domain="d",key1="k_v"} 5',
    'ratelimit_service_should_rate_limit_error{err_type="redis_error"} 1',
  ])
  // Scraped again after more: the totals, not the totals added twice.
  two.counts[0] = 9
  const second = samples(await registry.metrics())
  assert.ok(second.includes('ratelimit_service_rate_limit_total_hits{domain="d",key1="k_v"} 9'), second.join('\n'))
  assert.ok(second.includes('ratelimit_service_config_load_success 1'))
})
