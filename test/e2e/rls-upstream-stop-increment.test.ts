/**
 * envoyproxy/ratelimit's cases run with STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=true,
 * ported through the gateway on every store: its Redis cache test of that
 * setting (test/redis/fixed_cache_impl_test.go, the statuses and which
 * counters it increments), its integration test's variants with it
 * (test/integration/integration_test.go) and Envoy's token-quota script
 * under it. With the setting, a call in which some descriptor would go over
 * increments only the descriptors that go over; the others keep their count.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { d, fresh, HOUR, inOneWindow, lim, MINUTE, OK, onStores, OVER_LIMIT, st, type Entries } from '../helpers/rls-upstream.js'

const CONFIG = `
domain: domain
descriptors:
  - key: key4
    rate_limit: {unit: hour, requests_per_unit: 15}
  - key: key5
    rate_limit: {unit: hour, requests_per_unit: 14}
---
domain: another
descriptors:
  - key: key2
    rate_limit: {unit: minute, requests_per_unit: 20}
  - key: key3
    rate_limit: {unit: hour, requests_per_unit: 10}
---
domain: quota
descriptors:
  - key: service
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 2}
`

onStores(
  "envoyproxy/ratelimit's STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT cases",
  { files: () => ({ 'config.yaml': CONFIG }), env: { STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT: 'true' } },
  (g) => {
    test('TestOverLimitWithStopCacheKeyIncrementWhenOverlimitConfig: 11, 13, then one key going over: only that key is incremented', async () => {
      await inOneWindow(3600, async () => {
        const [a, b] = [fresh('value4'), fresh('value5')]
        const step = async (h4: number, h5: number) => {
          const r = await g().ask('domain', [d([['key4', a]], h4), d([['key5', b]], h5)])
          return [r.overall, r.statuses]
        }
        // Its mocked counters start at 10.
        assert.deepEqual(await step(10, 10), [OK, [st(OK, lim(15, HOUR), 5), st(OK, lim(14, HOUR), 4)]])
        assert.deepEqual(await step(1, 1), [OK, [st(OK, lim(15, HOUR), 4), st(OK, lim(14, HOUR), 3)]])
        assert.deepEqual(await step(2, 2), [OK, [st(OK, lim(15, HOUR), 2), st(OK, lim(14, HOUR), 1)]])
        // key5 goes over (15 of 14) and is incremented; key4, which would fit (15 of 15), is not.
        assert.deepEqual(await step(2, 2), [OVER_LIMIT, [st(OK, lim(15, HOUR), 2), st(OVER_LIMIT, lim(14, HOUR), 0)]])
        // What its INCRBY expectations say: key4 at 13, key5 at 15.
        assert.deepEqual(await step(0, 0), [OVER_LIMIT, [st(OK, lim(15, HOUR), 2), st(OVER_LIMIT, lim(14, HOUR), 0)]])
        // key5, still over with no hits, keeps key4 (which would fit) from being incremented.
        assert.deepEqual(await step(2, 0), [OVER_LIMIT, [st(OK, lim(15, HOUR), 2), st(OVER_LIMIT, lim(14, HOUR), 0)]])
      })
    })

    test('TestBasicConfig …WithstopCacheKeyIncrementWhenOverlimitConfig: once the hour key is over, the minute key stops counting', async () => {
      await inOneWindow(60, async () => {
        const v = fresh('random')
        for (let i = 0; i < 15; i++) {
          const r = await g().ask('another', [d([['key2', v]]), d([['key3', v]])])
          const over = i >= 10
          assert.deepEqual(
            [r.overall, r.statuses],
            [
              over ? OVER_LIMIT : OK,
              [
                st(OK, lim(20, MINUTE), over ? 10 : 20 - (i + 1)),
                over ? st(OVER_LIMIT, lim(10, HOUR), 0) : st(OK, lim(10, HOUR), 10 - (i + 1)),
              ],
            ],
            `call ${i + 1}`,
          )
        }
      })
    })

    test('token-quota.sh with it: the charge that goes over still counts, so the 4th request is limited', async () => {
      await inOneWindow(60, async () => {
        const service: Entries = [['service', fresh('service_2')]]
        const checks = []
        for (let i = 0; i < 5; i++) {
          checks.push((await g().ask('quota', [d(service, 0)])).overall)
          await g().ask('quota', [d(service, 1)])
        }
        assert.deepEqual(checks, [OK, OK, OK, OVER_LIMIT, OVER_LIMIT])
      })
    })
  },
)
