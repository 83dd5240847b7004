/** GET /v1/admin/bundle's answer (src/admin/bundle-view.ts) on the compiled bundle of test/helpers/admin.ts. */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { bundleAnswer, storeKind } from '../../../src/admin/bundle-view.js'
import { MemoryStore } from '../../../src/store/memory/store.js'
import { adminBundle } from '../../helpers/admin.js'

const store = new MemoryStore({ maxBytes: 1 << 20 })
const settings = { mode: 'reverse_proxy' as const, workers: 1, configFile: '/etc/fairvisor' }
const reloads = [{ at: '2026-01-01T00:00:00.000Z', result: 'applied', version: '4' }]

test('version (a string), hash, source, load time, how it runs, each policy with its rules as written, the reloads', () => {
  const b = adminBundle(4)
  const a = bundleAnswer(b, reloads, settings, store, 'open')
  assert.equal(a.version, '4')
  assert.equal(a.hash, b.hash)
  assert.equal(a.source, '/etc/fairvisor/bundle.json')
  assert.equal(a.loaded_at, new Date(b.loadedAt * 1000).toISOString())
  assert.deepEqual([a.mode, a.workers, a.store], ['reverse_proxy', 1, { kind: 'memory', healthy: true }])
  assert.deepEqual(a.reloads, reloads)
  const policies = a.policies as { id: string; mode: string; rules: Record<string, unknown>[] }[]
  assert.deepEqual(
    policies.map((p) => [p.id, p.mode, p.rules.map((r) => r.name)]),
    [
      ['api', 'enforce', ['per_user', 'per_key', 'loop_detection']],
      ['llm', 'shadow', ['tokens']],
      ['tiers', 'enforce', ['gold', 'free']],
    ],
  )
  assert.deepEqual(policies[0]!.rules[0], {
    name: 'per_user',
    algorithm: 'token_bucket',
    algorithm_config: { burst: 2, tokens_per_second: 0.001 },
    limit_keys: ['header:x-user'],
  })
  assert.deepEqual(policies[1]!.rules[0]!.algorithm_config, { tokens_per_minute: 1000, tokens_per_day: 5000 }, 'as written, not normalised')
})

test('no bundle loaded: nulls, no policies, the configured source', () => {
  const a = bundleAnswer(null, [], settings, store, 'closed')
  assert.deepEqual([a.version, a.hash, a.loaded_at, a.source, a.policies], [null, null, null, '/etc/fairvisor', []])
})

test('the in-process store shared by worker threads is `shared`', () => {
  assert.equal(storeKind(store, 1), 'memory')
  assert.equal(storeKind(store, 4), 'shared')
})
