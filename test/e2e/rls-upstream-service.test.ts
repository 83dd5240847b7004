/**
 * envoyproxy/ratelimit's service tests (test/service/ratelimit_test.go),
 * ported through the gateway on every store. Upstream mocks the cache and
 * the configuration; here a real configuration gives the same limits and
 * hits_addend puts a descriptor over when its case needs it over. The
 * gateway starts with a configuration that does not load (its initial load
 * error case), then loads this file's and later reloads it; its response
 * headers are on, under custom names (LIMIT_*_HEADER). MERGE_DOMAIN_CONFIG
 * is off (its duplicate domain case).
 * Not here: global SHADOW_MODE and QUOTA_MODE, RESPONSE_DYNAMIC_METADATA,
 * the statistics, the cache error answer, HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED.
 */
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { test } from 'node:test'
import { status as Code } from '@grpc/grpc-js'
import { assertReset, d, fixtures, fresh, HOUR, lim, MAX_UINT32, MINUTE, OK, onStores, OVER_LIMIT, st } from '../helpers/rls-upstream.js'

/** The limits upstream's mocks return, as configuration: key-only descriptors, so each case counts on values of its own. */
const SERVICE = `
domain: test-domain
descriptors:
  - key: known
    rate_limit: {unit: minute, requests_per_unit: 1}
---
domain: some-domain
descriptors:
  - key: foo
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: baz
    rate_limit: {unlimited: true}
---
domain: rule-shadow
descriptors:
  - key: foo
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: hello
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 10}
---
domain: mixed-shadow
descriptors:
  - key: foo
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: hello
    rate_limit: {unit: minute, requests_per_unit: 10}
---
domain: quota-domain
descriptors:
  - key: regular
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: quota
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: quota1
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: quota2
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 3}
---
domain: headers-domain
descriptors:
  - key: hourly
    rate_limit: {unit: hour, requests_per_unit: 5}
  - key: minutely
    rate_limit: {unit: minute, requests_per_unit: 10}
`
/** Added by its "force a config reload" step. */
const DIFFERENT = `
---
domain: different-domain
descriptors:
  - key: foo
    rate_limit: {name: key_name, unit: minute, requests_per_unit: 10}
`

const HEADERS = {
  LIMIT_LIMIT_HEADER: 'A-Ratelimit-Limit',
  LIMIT_REMAINING_HEADER: 'A-Ratelimit-Remaining',
  LIMIT_RESET_HEADER: 'A-Ratelimit-Reset',
}

onStores(
  "envoyproxy/ratelimit's service tests",
  { files: () => fixtures('misspelled_key.yaml'), env: { LIMIT_RESPONSE_HEADERS_ENABLED: 'true', ...HEADERS } },
  (g) => {
    test('TestInitialLoadError: no configuration loaded at start, every call is answered "no rate limit configuration loaded"', async () => {
      await assert.rejects(
        g().ask('test-domain', [d([['hello', 'world']])]),
        (e: { code: number; details: string }) => e.code === Code.UNKNOWN && e.details === 'no rate limit configuration loaded',
      )
    })

    test('TestServiceHealthStatus: grpc.health.v1 Check("ratelimit") is SERVING', async () => {
      assert.equal((await g().c.healthCheck('ratelimit')).status, 1)
    })

    test('TestService: an answer, a reload, a refused reload and the last good configuration still answering, in any descriptor order', async () => {
      const gw = g()
      assert.equal((await gw.change({ 'misspelled_key.yaml': undefined, 'service.yaml': SERVICE })).msg, 'rls config loaded')
      await gw.until('test-domain', [['known', 'x']], (s) => s.limit !== undefined)
      // First request, config loaded: a domain without a limit for the descriptor.
      const first = await gw.ask('test-domain', [d([['hello', 'world']])])
      assert.deepEqual([first.overall, first.statuses], [OK, [st(OK)]])

      // Force a config reload: a domain more.
      assert.equal((await gw.change({ 'service.yaml': SERVICE + DIFFERENT })).msg, 'rls config loaded')
      await gw.until('different-domain', [['foo', 'probe']], (s) => s.limit !== undefined)
      const foo = fresh('bar')
      const over = await gw.ask('different-domain', [d([['foo', foo]], 11), d([['hello', 'world']])])
      assert.deepEqual([over.overall, over.statuses], [OVER_LIMIT, [st(OVER_LIMIT, lim(10, MINUTE, 'key_name'), 0), st(OK)]])

      // Config load failure: refused, the configuration in force stays.
      const refused = await gw.change({ 'zz-broken.yaml': 'domain: broken\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight}\n' })
      assert.match(String(refused.msg), /^rls config rejected/)
      assert.match((refused.err as { message: string }).message, /zz-broken\.yaml: invalid rate limit unit 'fortnight'/)
      // Also make sure order does not affect results.
      const again = await gw.ask('different-domain', [d([['hello', 'world']]), d([['foo', foo]], 11)])
      assert.deepEqual([again.overall, again.statuses], [OVER_LIMIT, [st(OK), st(OVER_LIMIT, lim(10, MINUTE, 'key_name'), 0)]])
      assert.equal((await gw.change({ 'zz-broken.yaml': undefined })).msg, 'rls config loaded')
    })

    test('TestRuleShadowMode: every limit in shadow_mode, all over: every status OK, the call OK', async () => {
      const r = await g().ask('rule-shadow', [d([['foo', fresh('bar')]], 11), d([['hello', fresh('world')]], 11)])
      assert.deepEqual([r.overall, r.statuses], [OK, [st(OK, lim(10, MINUTE), 0), st(OK, lim(10, MINUTE), 0)]])
    })

    test('TestMixedRuleShadowMode: the shadow_mode one over is OK, the other over is OVER_LIMIT, the call OVER_LIMIT', async () => {
      const r = await g().ask('mixed-shadow', [d([['foo', fresh('bar')]], 11), d([['hello', fresh('world')]], 11)])
      assert.deepEqual([r.overall, r.statuses], [OVER_LIMIT, [st(OK, lim(10, MINUTE), 0), st(OVER_LIMIT, lim(10, MINUTE), 0)]])
    })

    test('TestServiceWithCustomRatelimitHeaders: LIMIT_*_HEADER name the headers of the descriptor over its limit', async () => {
      const r = await g().ask('different-domain', [d([['foo', fresh('bar')]], 11), d([['hello', 'world']])])
      assert.deepEqual([r.overall, r.statuses], [OVER_LIMIT, [st(OVER_LIMIT, lim(10, MINUTE, 'key_name'), 0), st(OK)]])
      assert.deepEqual(Object.keys(r.headers), ['A-Ratelimit-Limit', 'A-Ratelimit-Remaining', 'A-Ratelimit-Reset'])
      assert.equal(r.headers['A-Ratelimit-Limit'], '10')
      assert.equal(r.headers['A-Ratelimit-Remaining'], '0')
      // Upstream's mocked clock says 58: the seconds left in the minute.
      assert.equal(Number(r.headers['A-Ratelimit-Reset']), r.resets[0])
      assertReset(r.resets[0], 60, r.at)
    })

    test("response headers, the descriptor upstream's service picks: one over its limit wins over one that has nothing left but is not over", async () => {
      const r = await g().ask('headers-domain', [d([['hourly', fresh('a')]], 5), d([['minutely', fresh('b')]], 11)])
      assert.deepEqual([r.overall, r.statuses], [OVER_LIMIT, [st(OK, lim(5, HOUR), 0), st(OVER_LIMIT, lim(10, MINUTE), 0)]])
      assert.deepEqual(r.headers, { 'A-Ratelimit-Limit': '10', 'A-Ratelimit-Remaining': '0', 'A-Ratelimit-Reset': String(r.resets[1]) })
    })

    test('TestEmptyDomain, TestEmptyDescriptors: answered an error with its message', async () => {
      const fails = (message: string) => (e: { code: number; details: string }) => e.code !== Code.OK && e.details === message
      await assert.rejects(g().ask('', [d([['hello', 'world']])]), fails('rate limit domain must not be empty'))
      await assert.rejects(g().ask('test-domain', []), fails('rate limit descriptor list must not be empty'))
    })

    test('TestUnlimited: a limited, an unknown and an unlimited descriptor; the unlimited one reports MaxUint32 left', async () => {
      const r = await g().ask('some-domain', [d([['foo', fresh('bar')]]), d([['hello', 'world']]), d([['baz', 'qux']])])
      assert.deepEqual([r.overall, r.statuses], [OK, [st(OK, lim(10, MINUTE), 9), st(OK), st(OK, undefined, MAX_UINT32)]])
    })

    /** [regular, quota] or [quota1, quota2] of quota-domain, each with the hits that put it where the case needs it. */
    const quota = (keys: [string, string], hits: [number, number]) =>
      g().ask(
        'quota-domain',
        keys.map((k, i) => d([[k, fresh('limit')]], hits[i])),
      )

    test('TestServicePerDescriptorQuotaMode: a rate limit over and a quota under: OVER_LIMIT', async () => {
      const r = await quota(['regular', 'quota'], [6, 3])
      assert.deepEqual([r.overall, r.statuses], [OVER_LIMIT, [st(OVER_LIMIT, lim(5, MINUTE), 0), st(OK, lim(3, MINUTE), 0)]])
    })

    test('TestServiceMixedPerDescriptorModes: a rate limit under and its only quota over: OVER_LIMIT (every quota is over)', async () => {
      const r = await quota(['regular', 'quota'], [5, 4])
      assert.deepEqual([r.overall, r.statuses], [OVER_LIMIT, [st(OK, lim(5, MINUTE), 0), st(OVER_LIMIT, lim(3, MINUTE), 0)]])
    })

    test('TestServiceMixedPerDescriptorModesUnderLimit: both under: OK', async () => {
      const r = await quota(['regular', 'quota'], [5, 3])
      assert.deepEqual([r.overall, r.statuses], [OK, [st(OK, lim(5, MINUTE), 0), st(OK, lim(3, MINUTE), 0)]])
    })

    test('TestServiceQuotaModeOnlyAllOverTheLimit: every quota over: OVER_LIMIT', async () => {
      const r = await quota(['quota1', 'quota2'], [6, 4])
      assert.deepEqual([r.overall, r.statuses], [OVER_LIMIT, [st(OVER_LIMIT, lim(5, MINUTE), 0), st(OVER_LIMIT, lim(3, MINUTE), 0)]])
    })

    test('TestServiceQuotaModeOnlySomeOverTheLimit: one quota over, one under: OK', async () => {
      const r = await quota(['quota1', 'quota2'], [6, 3])
      assert.deepEqual([r.overall, r.statuses], [OK, [st(OVER_LIMIT, lim(5, MINUTE), 0), st(OK, lim(3, MINUTE), 0)]])
    })

    test('TestDuplicateDomain: a domain in two files is refused when MERGE_DOMAIN_CONFIG is off', async () => {
      const gw = g()
      const f = fixtures('basic_config.yaml', 'duplicate_domain.yaml')
      const line = await gw.change({ 'a_basic_config.yaml': f['basic_config.yaml'], 'b_duplicate_domain.yaml': f['duplicate_domain.yaml'] })
      const want = `${join(gw.dir, 'b_duplicate_domain.yaml')}: duplicate domain 'test-domain' in config file`
      assert.equal((line.err as { message: string } | undefined)?.message, want)
      assert.equal((await gw.change({ 'a_basic_config.yaml': undefined, 'b_duplicate_domain.yaml': undefined })).msg, 'rls config loaded')
    })
  },
)
