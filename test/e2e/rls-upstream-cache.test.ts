/**
 * envoyproxy/ratelimit's cache and limiter tests (test/redis/fixed_cache_impl_test.go,
 * test/limiter/base_limiter_test.go; test/memcached/cache_impl_test.go is the
 * same logic), the statuses part, ported through the gateway on every store.
 * Upstream mocks Redis and sets each counter's value (INCRBY answers 11, 13,
 * 16…); here the counters are real and a descriptor's own hits_addend brings
 * a counter to that value, in the same call when its window is a second (one
 * call is one store call: one instant for all its windows) and inside one
 * window otherwise. Response headers are on under their default names (its
 * service test of the default header names).
 * Not here: statistics (total_hits, near_limit…), the local over-limit cache
 * and its statistics, expiration jitter, cache key prefixes, tracing, the
 * cache error answer, STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT (rls-upstream-stop-increment.test.ts).
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import {
  assertReset,
  d,
  DAY,
  fresh,
  HOUR,
  inOneWindow,
  lim,
  MINUTE,
  OK,
  onStores,
  OVER_LIMIT,
  SECOND,
  st,
  type Descriptor,
} from '../helpers/rls-upstream.js'

/** The limits its tests give the cache, as configuration; key-only descriptors count per value, so a case takes values of its own. */
const CACHE = `
domain: domain
descriptors:
  - key: key
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: key2
    descriptors:
      - key: subkey2
        rate_limit: {unit: minute, requests_per_unit: 10}
  - key: key3
    rate_limit: {unit: hour, requests_per_unit: 10}
    descriptors:
      - key: subkey3
        rate_limit: {unit: day, requests_per_unit: 10}
  - key: key4
    rate_limit: {unit: hour, requests_per_unit: 15}
  - key: key4_shadow
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 15}
  - key: key5
    rate_limit: {unit: second, requests_per_unit: 20}
  - key: key6
    rate_limit: {unit: second, requests_per_unit: 8}
  - key: key7
    rate_limit: {unit: second, requests_per_unit: 20}
  - key: key8
    rate_limit: {unit: second, requests_per_unit: 20}
  - key: key9
    rate_limit: {unit: second, requests_per_unit: 20}
  - key: key10
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: limit5
    rate_limit: {unit: second, requests_per_unit: 5}
  - key: limit5_shadow
    shadow_mode: true
    rate_limit: {unit: second, requests_per_unit: 5}
  - key: limit10
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: limit10_shadow
    shadow_mode: true
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: files
    value: files/*
    share_threshold: true
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: parent
    descriptors:
      - key: files
        value: nested/*
        share_threshold: true
        rate_limit: {unit: second, requests_per_unit: 10}
  - key: files
    value: top/*
    share_threshold: true
    descriptors:
      - key: files
        value: nested/*
        share_threshold: true
        rate_limit: {unit: second, requests_per_unit: 10}
  - key: second
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: minute
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: hour
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: day
    rate_limit: {unit: day, requests_per_unit: 1}
  - key: week
    rate_limit: {unit: week, requests_per_unit: 1}
  - key: month
    rate_limit: {unit: month, requests_per_unit: 1}
  - key: year
    rate_limit: {unit: year, requests_per_unit: 1}
---
domain: different-domain
descriptors:
  - key: foo
    rate_limit: {unit: minute, requests_per_unit: 10}
`

onStores(
  "envoyproxy/ratelimit's cache and limiter tests",
  { files: () => ({ 'cache.yaml': CACHE }), env: { LIMIT_RESPONSE_HEADERS_ENABLED: 'true' } },
  (g) => {
    const ask = (descriptors: Descriptor[], hits?: number) => g().ask('domain', descriptors, hits)

    test('TestRedis (TestMemcached, TestRedisWithJitter): a count of 5 of 10 a second leaves 5, reset in 1 s', async () => {
      const v = fresh('value')
      const r = await ask([d([['key', v]], 4), d([['key', v]], 1)])
      assert.deepEqual([r.overall, r.statuses], [OK, [st(OK, lim(10, SECOND), 6), st(OK, lim(10, SECOND), 5)]])
      assert.deepEqual(r.resets, [1, 1])
    })

    test('TestRedis: a descriptor with no limit and a hits_addend of 0 is OK; the one at 11 of 10 a minute is OVER_LIMIT', async () => {
      await inOneWindow(60, async () => {
        const [v, sub] = [fresh('value2'), fresh('subvalue2')]
        const nested = (hits: number) =>
          d(
            [
              ['key2', v],
              ['subkey2', sub],
            ],
            hits,
          )
        assert.deepEqual((await ask([nested(10)])).statuses, [st(OK, lim(10, MINUTE), 0)])
        const r = await ask([d([['key2', v]], 0), nested(1)])
        assert.deepEqual([r.overall, r.statuses], [OVER_LIMIT, [st(OK), st(OVER_LIMIT, lim(10, MINUTE), 0)]])
        assert.equal(r.resets[0], undefined)
        assertReset(r.resets[1], 60, r.at)
      })
    })

    test('TestRedis: at 11 of 10 an hour a check of 0 hits is OVER_LIMIT, and 13 of 10 a day too; resets in their units', async () => {
      await inOneWindow(3600, async () => {
        const [v, sub] = [fresh('value3'), fresh('subvalue3')]
        const pair = (a: number, b: number) => [
          d([['key3', v]], a),
          d(
            [
              ['key3', v],
              ['subkey3', sub],
            ],
            b,
          ),
        ]
        assert.equal((await ask(pair(11, 12))).overall, OVER_LIMIT, 'a rejected call counts too')
        const r = await ask(pair(0, 1))
        assert.deepEqual([r.overall, r.statuses], [OVER_LIMIT, [st(OVER_LIMIT, lim(10, HOUR), 0), st(OVER_LIMIT, lim(10, DAY), 0)]])
        assertReset(r.resets[0], 3600, r.at)
        assertReset(r.resets[1], 86_400, r.at)
      })
    })

    test('TestNearLimit, TestOverLimitWithLocalCache: 11, 13, 16 of 15 an hour leave 4, 2, then OVER_LIMIT, and OVER_LIMIT after', async () => {
      await inOneWindow(3600, async () => {
        const v = fresh('value4')
        const step = async (hits: number) => (await ask([d([['key4', v]], hits)])).statuses
        assert.deepEqual(await step(10), [st(OK, lim(15, HOUR), 5)])
        assert.deepEqual(await step(1), [st(OK, lim(15, HOUR), 4)])
        assert.deepEqual(await step(2), [st(OK, lim(15, HOUR), 2)])
        assert.deepEqual(await step(3), [st(OVER_LIMIT, lim(15, HOUR), 0)])
        assert.deepEqual(await step(1), [st(OVER_LIMIT, lim(15, HOUR), 0)])
      })
    })

    test('TestOverLimitWithLocalCacheShadowRule: the same in shadow_mode is OK throughout, with nothing left once over', async () => {
      await inOneWindow(3600, async () => {
        const v = fresh('value4')
        const step = async (hits: number) => {
          const r = await ask([d([['key4_shadow', v]], hits)])
          return [r.overall, r.statuses]
        }
        assert.deepEqual(await step(11), [OK, [st(OK, lim(15, HOUR), 4)]])
        assert.deepEqual(await step(2), [OK, [st(OK, lim(15, HOUR), 2)]])
        assert.deepEqual(await step(3), [OK, [st(OK, lim(15, HOUR), 0)]])
        assert.deepEqual(await step(1), [OK, [st(OK, lim(15, HOUR), 0)]])
      })
    })

    test('TestNearLimit: a request hits_addend above 1, under, near and over the limit', async () => {
      // [count before, request hits_addend, limit key, its limit, left after (undefined: OVER_LIMIT)]
      const cases: Array<[number, number, string, number, number | undefined]> = [
        [2, 3, 'key5', 20, 15], // all of it under the limit, under the near limit
        [5, 2, 'key6', 8, 1], // some of it over the near limit
        [16, 3, 'key7', 20, 1], // all of it over the near limit
        [19, 3, 'key8', 20, undefined], // some of it over the limit
        [15, 7, 'key9', 20, undefined], // some of it in all three places
        [27, 3, 'key10', 10, undefined], // all of it over the limit
      ]
      for (const [before, hits, key, limit, left] of cases) {
        const v = fresh('value')
        // The count before, then the request's hits_addend (the second descriptor has no own): one call, one second.
        const r = await ask([d([[key, v]], before), d([[key, v]])], hits)
        const expected = left === undefined ? st(OVER_LIMIT, lim(limit, SECOND), 0) : st(OK, lim(limit, SECOND), left)
        assert.deepEqual(r.statuses[1], expected, `${key}: ${before} + ${hits} of ${limit}`)
        assert.equal(r.overall, r.statuses.some((s) => s.code === OVER_LIMIT) ? OVER_LIMIT : OK)
      }
    })

    test('TestGetResponseStatus{OverLimit,BelowLimit}[ShadowMode], TestGetResponseStatusEmptyKey: over is OVER_LIMIT (OK in shadow_mode) with 0 left', async () => {
      const two = async (key: string, a: number, b: number) => {
        const v = fresh('v')
        const r = await ask([d([[key, v]], a), d([[key, v]], b)])
        return [r.overall, r.statuses]
      }
      assert.deepEqual(await two('limit5', 2, 5), [OVER_LIMIT, [st(OK, lim(5, SECOND), 3), st(OVER_LIMIT, lim(5, SECOND), 0)]])
      assert.deepEqual(await two('limit5_shadow', 2, 5), [OK, [st(OK, lim(5, SECOND), 3), st(OK, lim(5, SECOND), 0)]])
      assert.deepEqual(await two('limit10', 5, 1), [OK, [st(OK, lim(10, SECOND), 5), st(OK, lim(10, SECOND), 4)]])
      assert.deepEqual(await two('limit10_shadow', 5, 1), [OK, [st(OK, lim(10, SECOND), 5), st(OK, lim(10, SECOND), 4)]])
      assert.deepEqual((await ask([d([['nolimit', 'x']])])).statuses, [st(OK)])
    })

    test('TestGenerateCacheKeysWithShareThreshold: values a share_threshold wildcard matches count on one counter, at any level', async () => {
      const ten = (n: number) => Array.from({ length: n }, (_, i) => st(OK, lim(10, SECOND), 9 - i))
      const files = ['files/a.pdf', 'files/b.csv', 'files/c.txt', 'files/d.json', 'files/e.xml', 'files/subdir/f.txt']
      const r = await ask([
        ...files.map((f) => d([['files', f]])),
        d([
          ['parent', 'value1'],
          ['files', 'nested/file1.txt'],
        ]),
        d([
          ['parent', 'value1'],
          ['files', 'nested/file2.csv'],
        ]),
        d([
          ['parent', 'value2'],
          ['files', 'nested/file1.txt'],
        ]),
        d([
          ['files', 'top/file1.txt'],
          ['files', 'nested/sub1.txt'],
        ]),
        d([
          ['files', 'top/file2.pdf'],
          ['files', 'nested/sub2.csv'],
        ]),
      ])
      assert.deepEqual(r.statuses, [...ten(6), ...ten(2), ...ten(1), ...ten(2)])
    })

    test('CalculateReset: windows of every unit start at multiples of it since the epoch; duration_until_reset is what is left of it', async () => {
      const units: Array<[string, number, number]> = [
        ['second', 1, 1],
        ['minute', 2, 60],
        ['hour', 3, 3600],
        ['day', 4, 86_400],
        ['month', 5, 2_592_000],
        ['year', 6, 31_536_000],
        ['week', 7, 604_800],
      ]
      const r = await ask(units.map(([key]) => d([[key, fresh('w')]])))
      assert.deepEqual(
        r.statuses,
        units.map(([, unit]) => st(OK, lim(1, unit), 0)),
      )
      for (const [i, [key, , seconds]] of units.entries()) assertReset(r.resets[i], seconds, r.at, key)
    })

    test('TestServiceWithDefaultRatelimitHeaders: RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset of the descriptor over', async () => {
      const r = await g().ask('different-domain', [d([['foo', fresh('bar')]], 11), d([['hello', 'world']])])
      assert.deepEqual([r.overall, r.statuses], [OVER_LIMIT, [st(OVER_LIMIT, lim(10, MINUTE), 0), st(OK)]])
      assert.deepEqual(r.headers, { 'RateLimit-Limit': '10', 'RateLimit-Remaining': '0', 'RateLimit-Reset': String(r.resets[0]) })
    })
  },
)
