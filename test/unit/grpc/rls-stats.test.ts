/**
 * envoyproxy/ratelimit's statistics counted as it counts them: its own
 * limiter cases (test/limiter/base_limiter_test.go, test/redis
 * fixed_cache_impl_test.go TestNearLimit) on the arithmetic, then whole
 * ShouldRateLimit calls through the real service, engine and in-process
 * store (charged or not when rejected, shadow_mode, hits_addend, a store
 * that fails), the cap on keys built from requests, and what statsd is sent.
 */
import assert from 'node:assert/strict'
import { after, describe, test } from 'node:test'
import { createLimitDecider } from '../../../src/decision/decide.js'
import { Engine } from '../../../src/engine/evaluate.js'
import { parseRlsYaml } from '../../../src/grpc/rls-config.js'
import { createShouldRateLimit, type RateLimitRequest } from '../../../src/grpc/rls-service.js'
import { account, countWithHits, OVERFLOW, RATE_LIMIT_STATS, RlsStats } from '../../../src/grpc/rls-stats.js'
import { MemoryStore } from '../../../src/store/memory/store.js'
import { RedisStore } from '../../../src/store/redis/store.js'
import { parseRedisUrl } from '../../../src/store/redis/url.js'
import type { Store } from '../../../src/store/store.js'

type Counts = Record<(typeof RATE_LIMIT_STATS)[number], number>
const named = (c: number[]): Counts => Object.fromEntries(RATE_LIMIT_STATS.map((s, i) => [s, c[i]])) as Counts

/** account() from zero: upstream's GetResponseDescriptorStatus on (limit, before, after, hits). */
function counted(rpu: number, before: number, after: number, hits: number, shadow = false, ratio = 0.8): Counts {
  const c = [0, 0, 0, 0, 0]
  account(c, rpu, hits, before, after, shadow, ratio)
  return named(c)
}

describe("upstream's arithmetic (base_limiter.go)", () => {
  test('base_limiter_test.go: over the limit, over in shadow_mode, below it', () => {
    // TestGetResponseStatusOverLimit(ShadowMode): limit 5, 2 before, 7 after, 1 hit.
    assert.deepEqual(counted(5, 2, 7, 1), { total_hits: 0, over_limit: 2, near_limit: 1, within_limit: 0, shadow_mode: 0 })
    assert.deepEqual(counted(5, 2, 7, 1, true), { total_hits: 0, over_limit: 2, near_limit: 1, within_limit: 0, shadow_mode: 2 })
    // TestGetResponseStatusBelowLimit: limit 10, 6 after.
    assert.deepEqual(counted(10, 2, 6, 1), { total_hits: 0, over_limit: 0, near_limit: 0, within_limit: 1, shadow_mode: 0 })
  })

  test('fixed_cache_impl_test.go TestNearLimit: hits split between within, near and over', () => {
    const seq = [counted(15, 10, 11, 1), counted(15, 12, 13, 1), counted(15, 15, 16, 1)]
    assert.deepEqual(
      seq.map((c) => [c.over_limit, c.near_limit, c.within_limit]),
      [
        [0, 0, 1],
        [0, 1, 1],
        [1, 0, 0],
      ],
    )
    assert.deepEqual(counted(20, 2, 5, 3), { total_hits: 0, over_limit: 0, near_limit: 0, within_limit: 3, shadow_mode: 0 })
    assert.deepEqual(counted(8, 5, 7, 2), { total_hits: 0, over_limit: 0, near_limit: 1, within_limit: 2, shadow_mode: 0 })
    assert.deepEqual(counted(20, 16, 19, 3), { total_hits: 0, over_limit: 0, near_limit: 3, within_limit: 3, shadow_mode: 0 })
    assert.deepEqual(counted(20, 19, 22, 3), { total_hits: 0, over_limit: 2, near_limit: 1, within_limit: 0, shadow_mode: 0 })
    assert.deepEqual(counted(20, 15, 22, 7), { total_hits: 0, over_limit: 2, near_limit: 4, within_limit: 0, shadow_mode: 0 })
    assert.deepEqual(counted(10, 27, 30, 3), { total_hits: 0, over_limit: 3, near_limit: 0, within_limit: 0, shadow_mode: 0 })
  })

  test('the near threshold is float32 arithmetic, as upstream computes it; NEAR_LIMIT_RATIO moves it', () => {
    // 0.7 × 90 is 62.99… in float64 but 63 in float32: the 64th hit is the first near, not the 63rd.
    assert.equal(counted(90, 62, 63, 1, false, 0.7).near_limit, 0)
    assert.equal(counted(90, 63, 64, 1, false, 0.7).near_limit, 1)
    assert.equal(counted(10, 4, 5, 1, false, 0.4).near_limit, 1)
    assert.equal(counted(0, 0, 1, 1).over_limit, 1, 'requests_per_unit 0: every hit over')
  })

  test("the count with the descriptor's hits, from each kind of outcome", () => {
    assert.equal(countWithHits({ allowed: true, value: 5, retryAfter: 1 }, 2, false, true), 5)
    assert.equal(countWithHits({ allowed: false, value: 5, retryAfter: 1 }, 2, false, true), 7)
    assert.equal(countWithHits({ allowed: false, value: 7, retryAfter: 1 }, 2, true, true), 7, 'read after the charge')
    assert.equal(countWithHits({ allowed: true, value: 5, retryAfter: 1 }, 2, true, false), 7, 'read, nothing charged')
  })
})

const YAML = `domain: d
descriptors:
  - key: k
    rate_limit: {unit: hour, requests_per_unit: 5}
  - key: s
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: free
    rate_limit: {unlimited: true}
  - key: user
    detailed_metric: true
    rate_limit: {unit: hour, requests_per_unit: 100}
`

function service(store: Store, chargeRejected = true, maxKeys = 1000) {
  const stats = new RlsStats(0.8, maxKeys)
  const engine = new Engine({ store, failPolicy: 'open', observer: { descriptorMissing() {}, shadowReject() {}, storeError() {} } })
  const config = parseRlsYaml(YAML, 'inline')
  const shouldRateLimit = createShouldRateLimit({
    config: () => config,
    decideLimits: createLimitDecider({ engine, clock: () => Date.UTC(2026, 0, 1), decided() {} }),
    responseHeaders: false,
    chargeRejected,
    answered() {},
    counted: (name, domain, entries, p, after) => stats.hit(name, domain, entries, p, after),
  })
  const ask = (descriptors: RateLimitRequest['descriptors']) =>
    new Promise<{ overall_code: number }>((resolve, reject) =>
      shouldRateLimit({ domain: 'd', descriptors }, (err, res) => (err ? reject(err) : resolve(res!))),
    )
  const of = (key: string): Counts | undefined => {
    const s = stats.keys.get(key)
    return s && named(s.counts)
  }
  return { stats, ask, of }
}

const one = (key: string, value: string, hits?: number): RateLimitRequest['descriptors'] => [
  { entries: [{ key, value }], ...(hits === undefined ? {} : { hits_addend: { value: hits } }) },
]

describe('counted through ShouldRateLimit calls', () => {
  for (const chargeRejected of [true, false])
    test(`seven hits on a limit of 5 (${chargeRejected ? 'a rejected call charged' : 'STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT'})`, async () => {
      const g = service(new MemoryStore({ maxBytes: 1 << 20 }), chargeRejected)
      for (let i = 0; i < 7; i++) await g.ask(one('k', 'v'))
      // Near from the 5th hit (past 4 = 0.8 × 5); the 6th and 7th over, past the limit entirely.
      assert.deepEqual(g.of('d.k'), { total_hits: 7, over_limit: 2, near_limit: 1, within_limit: 5, shadow_mode: 0 })
    })

  test('a key-only descriptor: one counter per value, one statistics key for all (without detailed_metric)', async () => {
    const g = service(new MemoryStore({ maxBytes: 1 << 20 }))
    for (let i = 0; i < 7; i++) assert.equal((await g.ask(one('k', `v${i % 2}`))).overall_code, 1)
    assert.deepEqual(g.of('d.k'), { total_hits: 7, over_limit: 0, near_limit: 0, within_limit: 7, shadow_mode: 0 })
  })

  test('hits_addend counts hits, not calls; 0 only checks', async () => {
    const g = service(new MemoryStore({ maxBytes: 1 << 20 }))
    await g.ask(one('k', 'a', 3))
    await g.ask(one('k', 'a', 0))
    await g.ask(one('k', 'a', 3)) // 3 → 6: one hit near (5th), one over
    assert.deepEqual(g.of('d.k'), { total_hits: 6, over_limit: 1, near_limit: 1, within_limit: 3, shadow_mode: 0 })
  })

  test('shadow_mode: its hits over are over_limit and shadow_mode, the call OK', async () => {
    const g = service(new MemoryStore({ maxBytes: 1 << 20 }))
    for (let i = 0; i < 3; i++) assert.equal((await g.ask(one('s', 'x'))).overall_code, 1)
    assert.deepEqual(g.of('d.s'), { total_hits: 3, over_limit: 1, near_limit: 1, within_limit: 2, shadow_mode: 1 })
  })

  test('an unlimited or unmatched descriptor is not counted; detailed_metric keys by value', async () => {
    const g = service(new MemoryStore({ maxBytes: 1 << 20 }))
    await g.ask([...one('free', 'x')!, ...one('nothing', 'x')!, ...one('user', 'alice')!, ...one('user', 'bob')!])
    assert.deepEqual([...g.stats.keys.keys()].sort(), ['d.user_alice', 'd.user_bob'])
  })

  test('keys built from requests stop at the cap: the rest count under <domain>._overflow', async () => {
    const g = service(new MemoryStore({ maxBytes: 1 << 20 }), true, 2)
    for (const u of ['a', 'b', 'c', 'd', 'a']) await g.ask(one('user', u))
    await g.ask(one('k', 'x')) // a configured key is not built per call: never capped
    assert.deepEqual([...g.stats.keys.keys()].sort(), ['d._overflow', 'd.k', 'd.user_a', 'd.user_b'])
    assert.equal(g.of('d.user_a')!.total_hits, 2)
    assert.equal(g.of(`d.${OVERFLOW}`)!.total_hits, 2)
  })

  const stores: Store[] = []
  after(() => Promise.all(stores.map((s) => s.close())))
  test('a store that fails: total_hits counted, nothing else (upstream counts the hits before its store call)', async () => {
    const store = new RedisStore({ target: parseRedisUrl('redis://127.0.0.1:1'), timeoutMs: 500 })
    stores.push(store)
    const g = service(store)
    await g.ask(one('k', 'x', 2))
    assert.deepEqual(g.of('d.k'), { total_hits: 2, over_limit: 0, near_limit: 0, within_limit: 0, shadow_mode: 0 })
  })
})

describe('what statsd is sent', () => {
  test("each counter's gain since the last drain, under upstream's names; nothing when nothing changed", async () => {
    const g = service(new MemoryStore({ maxBytes: 1 << 20 }))
    const drained = () => {
      const lines: string[] = []
      g.stats.drain((name, delta) => lines.push(`${name}:${delta}|c`))
      return lines.sort()
    }
    await g.ask(one('k', 'x', 5))
    g.stats.count('config_load_success')
    assert.deepEqual(drained(), [
      'ratelimit.service.config_load_success:1|c',
      'ratelimit.service.rate_limit.d.k.near_limit:1|c',
      'ratelimit.service.rate_limit.d.k.total_hits:5|c',
      'ratelimit.service.rate_limit.d.k.within_limit:5|c',
    ])
    assert.deepEqual(drained(), [])
    await g.ask(one('k', 'x'))
    g.stats.count('service_error')
    assert.deepEqual(drained(), [
      'ratelimit.service.call.should_rate_limit.service_error:1|c',
      'ratelimit.service.rate_limit.d.k.over_limit:1|c',
      'ratelimit.service.rate_limit.d.k.total_hits:1|c',
    ])
  })
})
