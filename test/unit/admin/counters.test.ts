/**
 * GET and DELETE /v1/admin/counters' workings (src/admin/counters.ts) on the compiled bundle of
 * test/helpers/admin.ts: what a query names (rules, fallbacks, guards, shadow and LLM counters), a
 * credential's shown hash mapped back through the rejected keys, and the counter read and reset on the
 * in-process store and on Redis (127.0.0.1:6379, keys of this run only).
 */
import assert from 'node:assert/strict'
import { after, describe, test } from 'node:test'
import {
  counterAnswer,
  counterQuery,
  type CounterTarget,
  readCounter,
  resetCounter,
  resolveCounter,
  ruleByLabel,
  ruleLabel,
} from '../../../src/admin/counters.js'
import { utcDay } from '../../../src/algorithms/llm.js'
import { shownKey } from '../../../src/engine/log-key.js'
import { AdminRequestError, type AdminErrorCode } from '../../../src/errors.js'
import type { ProcessView } from '../../../src/observe/admin-view.js'
import { MemoryStore } from '../../../src/store/memory/store.js'
import { RedisStore } from '../../../src/store/redis/store.js'
import { parseRedisUrl } from '../../../src/store/redis/url.js'
import { applyAsync, type Check, type Store } from '../../../src/store/store.js'
import { adminBundle } from '../../helpers/admin.js'

const bundle = adminBundle()
const NOW = Date.UTC(2026, 5, 1, 12)
const api = bundle.policies.find((p) => p.id === 'api')!
const q = (policy: string, rule: string, key: string) => ({ policy, rule, key })
const noView = (): Promise<ProcessView> => Promise.reject(new Error('the rejected keys are not needed here'))
const refusedWith = (code: AdminErrorCode) => (e: unknown) => e instanceof AdminRequestError && e.adminCode === code

describe('what a query names', () => {
  test('policy, rule and key are each required', () => {
    assert.deepEqual(counterQuery(new URLSearchParams('policy=api&rule=per_user&key=a%7Cb')), q('api', 'per_user', 'a|b'))
    for (const bad of ['rule=r&key=k', 'policy=p&key=k', 'policy=p&rule=r', 'policy=&rule=r&key=k'])
      assert.throws(() => counterQuery(new URLSearchParams(bad)), refusedWith('admin_bad_request'), bad)
  })

  test('rules by name, the fallback by its name, the guards as loop_detection and circuit_breaker', () => {
    assert.equal(ruleByLabel(api, 'per_user'), api.rules[0])
    assert.equal(ruleByLabel(api, 'loop_detection'), api.loop)
    assert.equal(ruleLabel(api, api.loop!), 'loop_detection')
    assert.equal(ruleByLabel(api, 'circuit_breaker'), undefined, 'no breaker in this policy')
    const tiers = bundle.policies.find((p) => p.id === 'tiers')!
    assert.equal(ruleByLabel(tiers, 'free'), tiers.fallback)
    assert.equal(ruleLabel(tiers, tiers.fallback!), 'free')
  })

  test('unknown policy or rule, or no bundle: admin_unknown_rule', async () => {
    await assert.rejects(resolveCounter(bundle, q('nope', 'per_user', 'a'), NOW, noView), refusedWith('admin_unknown_rule'))
    await assert.rejects(resolveCounter(bundle, q('api', 'nope', 'a'), NOW, noView), refusedWith('admin_unknown_rule'))
    await assert.rejects(resolveCounter(null, q('api', 'per_user', 'a'), NOW, noView), /no bundle is loaded/)
  })

  test('the counter keys: enforce, shadow (an LLM rule with its day counter of today), global shadow, guards', async () => {
    assert.deepEqual((await resolveCounter(bundle, q('api', 'per_user', 'alice'), NOW, noView)).keys, ['tb:per_user:alice'])
    const llm = await resolveCounter(bundle, q('llm', 'tokens', 'alice'), NOW, noView)
    assert.equal(llm.shadow, true)
    assert.deepEqual(llm.keys, ['shadow:tpm:llm:tokens:alice', `shadow:tpd:llm:tokens:alice:${utcDay(NOW)}`])
    const globalShadow = { ...bundle, globalShadowUntil: NOW + 1000 }
    assert.deepEqual((await resolveCounter(globalShadow, q('api', 'per_user', 'alice'), NOW, noView)).keys, ['shadow:tb:per_user:alice'])
    assert.deepEqual((await resolveCounter(globalShadow, q('api', 'per_user', 'alice'), NOW + 1000, noView)).keys, ['tb:per_user:alice'])
    assert.deepEqual((await resolveCounter(bundle, q('api', 'loop_detection', 'f00d'), NOW, noView)).keys, ['loop:api:f00d'])
  })
})

describe("a credential's shown hash", () => {
  const rule = api.rules[1]!
  const shown = shownKey(rule, 'sk-live-1')
  const view = async (): Promise<ProcessView> => ({
    top: {
      entries: [
        {
          item: { policy: 'api', rule: 'per_key', reason: 'token_bucket_exceeded', key: shown, composite: 'sk-live-1' },
          count: 3,
          error: 0,
        },
      ],
      floor: 0,
      total: 3,
    },
    stats: { decisions: { allow: 0, reject: 3, shadow_reject: 0 }, rejects_by_reason: {} },
    reloads: [],
  })

  test('maps back to the counter through the rejected keys; the credential itself needs no look-up', async () => {
    assert.match(shown, /^sha256:[0-9a-f]{12}$/)
    assert.deepEqual((await resolveCounter(bundle, q('api', 'per_key', shown), NOW, view)).keys, ['tb:per_key:sk-live-1'])
    assert.deepEqual((await resolveCounter(bundle, q('api', 'per_key', 'sk-live-1'), NOW, noView)).keys, ['tb:per_key:sk-live-1'])
  })

  test('a hash no rejected key shows: admin_unknown_key (the credential itself must be given)', async () => {
    await assert.rejects(resolveCounter(bundle, q('api', 'per_key', 'sha256:000000000000'), NOW, view), refusedWith('admin_unknown_key'))
    // On a rule that keys on no credential a key of that form is just a key.
    assert.deepEqual((await resolveCounter(bundle, q('api', 'per_user', 'sha256:000000000000'), NOW, noView)).keys, [
      'tb:per_user:sha256:000000000000',
    ])
  })
})

/** Drains `per_user`'s bucket of `who` (burst 2) and checks read and reset through the store. */
async function readAndReset(store: Store, who: string): Promise<void> {
  const t: CounterTarget = await resolveCounter(bundle, q('api', 'per_user', who), Date.now(), noView)
  const check: Check = { key: t.keys[0]!, limit: t.rule.limit, cost: 1, shadow: false }
  let o = await readCounter(store, t, Date.now())
  assert.deepEqual(counterAnswer(q('api', 'per_user', who), t, o), {
    policy: 'api',
    rule: 'per_user',
    key: who,
    algorithm: 'token_bucket',
    limit: 2,
    remaining: 2,
    reset_seconds: 1,
    in_flight: null,
  })
  for (let i = 0; i < 3; i++) await applyAsync(store, [check], Date.now() / 1000)
  for (let i = 0; i < 2; i++) {
    o = await readCounter(store, t, Date.now())
    assert.equal(counterAnswer(q('api', 'per_user', who), t, o).remaining, 0, 'drained, and reading charges nothing')
  }
  assert.equal((await applyAsync(store, [check], Date.now() / 1000))[0]!.allowed, false)
  await resetCounter(store, t)
  assert.equal(counterAnswer(q('api', 'per_user', who), t, await readCounter(store, t, Date.now())).remaining, 2, 'full again')
  assert.equal((await applyAsync(store, [check], Date.now() / 1000))[0]!.allowed, true)
}

describe('read and reset on the store in use', () => {
  test('in process (peeked: nothing written)', async () => {
    const store = new MemoryStore({ maxBytes: 1 << 20 })
    await readAndReset(store, 'alice')
    await readCounter(store, await resolveCounter(bundle, q('api', 'per_user', 'never'), NOW, noView), NOW)
    assert.equal(store.has('tb:per_user:never'), false)
  })

  const redis = new RedisStore({ target: parseRedisUrl(process.env.FAIRVISOR_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379'), timeoutMs: 1000 })
  after(() => redis.close())
  test('on Redis (read with a check of cost 0)', async () => {
    assert.equal(await redis.ready(3000), true)
    const who = `admin-counters-${process.pid}-${Date.now()}`
    try {
      await readAndReset(redis, who)
    } finally {
      await redis.client.command(['DEL', `tb:per_user:${who}`])
    }
  })
})
