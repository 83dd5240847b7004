// How /metrics combines the worker threads' registries: counts add up, one-process facts do not.
import assert from 'node:assert/strict'
import { it } from 'node:test'
import { AggregatorRegistry } from 'prom-client'
import { createMetrics } from '../../../src/observe/metrics.js'
import { WORKER_AGGREGATORS } from '../../../src/observe/worker-metrics.js'

it('every metric the aggregation table names is registered, with that aggregator', () => {
  const byName = new Map(
    createMetrics()
      .registry.getMetricsAsArray()
      .map((m) => [m.name, m.aggregator]),
  )
  for (const [name, aggregator] of Object.entries(WORKER_AGGREGATORS)) assert.equal(byName.get(name), aggregator, name)
  assert.equal(byName.get('fairvisor_decisions_total'), 'sum')
})

it('merged over three registries: decisions add up, config_info stays 1, remaining is the lowest', async () => {
  const parts = await Promise.all(
    [7, 3, 5].map((remaining) => {
      const m = createMetrics()
      m.decisions.inc({ action: 'allow', reason: '', policy: 'p' }, 2)
      m.configInfo.set({ version: '1', hash: 'h' }, 1)
      m.ratelimitRemaining.set({ policy: 'p' }, remaining)
      return m.registry.getMetricsAsJSON()
    }),
  )
  const text = await AggregatorRegistry.aggregate(parts).metrics()
  assert.match(text, /^fairvisor_decisions_total\{action="allow",reason="",policy="p"\} 6$/m)
  assert.match(text, /^fairvisor_config_info\{version="1",hash="h"\} 1$/m)
  assert.match(text, /^fairvisor_ratelimit_remaining\{policy="p"\} 3$/m)
})
