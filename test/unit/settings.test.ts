/**
 * What loadSettings refuses besides bad values: FAIRVISOR_* variables that
 * are no setting (with the closest one), trusted proxies covering every
 * address, short secrets, listeners sharing a port. And what it must never
 * refuse: every setting documented in docs/configuration.md, every name the
 * code reads (known from the readers themselves, whatever the other
 * settings say), the variables of Kubernetes service links.
 */
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, test } from 'node:test'
import { SettingError } from '../../src/errors.js'
import { loadSettings } from '../../src/settings.js'
import { closest, recording } from '../../src/unknown-settings.js'
import { ROOT } from '../helpers/processes.js'
import { settingsRead } from '../helpers/settings-names.js'

const base = { FAIRVISOR_BACKEND_URL: 'http://127.0.0.1:3000' }

function refusedAs(env: Record<string, string>, variable: string, message?: RegExp): void {
  assert.throws(
    () => loadSettings({ ...base, ...env }),
    (err: unknown) => {
      assert.ok(err instanceof SettingError, String(err))
      assert.equal(err.variable, variable)
      if (message) assert.match(err.message, message)
      return true
    },
    JSON.stringify(env),
  )
}

const documented = [...readFileSync(join(ROOT, 'docs/configuration.md'), 'utf8').matchAll(/^\| `(FAIRVISOR_[A-Z0-9_]+)` \|/gm)].map(
  (m) => m[1]!,
)

describe('known names', () => {
  test('every setting in docs/configuration.md is accepted, alone and all together', () => {
    assert.ok(documented.length >= 40)
    for (const name of documented) loadSettings({ [name]: '', ...base })
    loadSettings({ ...Object.fromEntries(documented.map((n) => [n, ''])), ...base })
  })

  test('every name the code reads is read on every start, so none is taken for unknown', () => {
    const read = new Set<string>()
    loadSettings(recording({ ...base }, read))
    assert.deepEqual(
      [...settingsRead()].filter((n) => !read.has(n)),
      [],
    )
  })

  test('the older name of the store deadline is known beside the new one', () => {
    assert.equal(loadSettings({ ...base, FAIRVISOR_STORE_TIMEOUT_MS: '30', FAIRVISOR_REDIS_TIMEOUT_MS: '70' }).storeTimeoutMs, 30)
  })
})

describe("envoyproxy/ratelimit's own names", () => {
  test('STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT: off by default, read under its own name, ours first', () => {
    const stop = (env: Record<string, string>) => loadSettings({ ...base, ...env }).rlsStopIncrementWhenOverLimit
    assert.equal(stop({}), false)
    assert.equal(stop({ STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT: 'true' }), true)
    assert.equal(stop({ FAIRVISOR_RLS_STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT: 'true' }), true)
    assert.equal(
      stop({ STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT: 'true', FAIRVISOR_RLS_STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT: 'false' }),
      false,
    )
  })

  test('LIMIT_RESPONSE_HEADERS_ENABLED and the LIMIT_*_HEADER names: off and RateLimit-* by default, ours first', () => {
    const s = (env: Record<string, string>) => loadSettings({ ...base, ...env })
    assert.equal(s({}).rlsResponseHeaders, false)
    assert.deepEqual(s({}).rlsHeaderNames, { limit: 'RateLimit-Limit', remaining: 'RateLimit-Remaining', reset: 'RateLimit-Reset' })
    assert.equal(s({ LIMIT_RESPONSE_HEADERS_ENABLED: 'true' }).rlsResponseHeaders, true)
    assert.equal(s({ LIMIT_RESPONSE_HEADERS_ENABLED: 'true', FAIRVISOR_RLS_RESPONSE_HEADERS: 'false' }).rlsResponseHeaders, false)
    const named = s({ LIMIT_LIMIT_HEADER: 'X-L', LIMIT_REMAINING_HEADER: 'X-R', LIMIT_RESET_HEADER: 'X-T' }).rlsHeaderNames
    assert.deepEqual(named, { limit: 'X-L', remaining: 'X-R', reset: 'X-T' })
  })

  test('FAIRVISOR_RLS_STORE_FAILURE: an error by default, as envoyproxy/ratelimit answers a store outage; policy on request; nothing else', () => {
    const s = (env: Record<string, string>) => loadSettings({ ...base, ...env }).rlsStoreFailure
    assert.equal(s({}), 'error')
    assert.equal(s({ FAIRVISOR_FAIL_POLICY: 'closed' }), 'error', 'whatever the fail policy')
    assert.equal(s({ FAIRVISOR_RLS_STORE_FAILURE: 'policy' }), 'policy')
    assert.equal(s({ FAIRVISOR_RLS_STORE_FAILURE: 'error' }), 'error')
    refusedAs({ FAIRVISOR_RLS_STORE_FAILURE: 'open' }, 'FAIRVISOR_RLS_STORE_FAILURE')
  })
  for (const [ours, theirs, field] of [
    ['FAIRVISOR_RLS_SHADOW_MODE', 'SHADOW_MODE', 'rlsShadowMode'],
    ['FAIRVISOR_RLS_QUOTA_MODE', 'QUOTA_MODE', 'rlsQuotaMode'],
    ['FAIRVISOR_RLS_RESPONSE_DYNAMIC_METADATA', 'RESPONSE_DYNAMIC_METADATA', 'rlsDynamicMetadata'],
  ] as const)
    test(`${theirs}: off by default, read under its own name, ${ours} first`, () => {
      const s = (env: Record<string, string>) => loadSettings({ ...base, ...env })[field]
      assert.equal(s({}), false)
      assert.equal(s({ [theirs]: 'true' }), true)
      assert.equal(s({ [ours]: 'true' }), true)
      assert.equal(s({ [theirs]: 'true', [ours]: 'false' }), false)
      assert.throws(() => s({ [theirs]: 'maybe' }), new RegExp(theirs))
    })
})

describe("envoyproxy/ratelimit's statistics settings", () => {
  const s = (env: Record<string, string>) => loadSettings({ ...base, ...env })

  test('NEAR_LIMIT_RATIO: 0.8 by default, read under its own name, ours first; a ratio outside 0 to 1 refused', () => {
    assert.equal(s({}).rlsNearLimitRatio, 0.8)
    assert.equal(s({ NEAR_LIMIT_RATIO: '0.5' }).rlsNearLimitRatio, 0.5)
    assert.equal(s({ NEAR_LIMIT_RATIO: '0.5', FAIRVISOR_RLS_NEAR_LIMIT_RATIO: '0.9' }).rlsNearLimitRatio, 0.9)
    refusedAs({ NEAR_LIMIT_RATIO: '80%' }, 'NEAR_LIMIT_RATIO', /not a number from 0 to 1/)
    refusedAs({ FAIRVISOR_RLS_NEAR_LIMIT_RATIO: '1.5' }, 'FAIRVISOR_RLS_NEAR_LIMIT_RATIO')
  })

  test("USE_STATSD: off by default; its STATSD_HOST, STATSD_PORT, STATS_FLUSH_INTERVAL with upstream's defaults, ours first", () => {
    assert.equal(s({}).rlsStatsd, undefined)
    assert.deepEqual(s({ USE_STATSD: 'true' }).rlsStatsd, { host: 'localhost', port: 8125, intervalMs: 10_000 })
    assert.equal(s({ USE_STATSD: 'true', FAIRVISOR_RLS_USE_STATSD: 'false' }).rlsStatsd, undefined)
    assert.deepEqual(s({ USE_STATSD: 'true', STATSD_HOST: 'stats', STATSD_PORT: '9125', STATS_FLUSH_INTERVAL: '1m30s' }).rlsStatsd, {
      host: 'stats',
      port: 9125,
      intervalMs: 90_000,
    })
    const ours = s({
      FAIRVISOR_RLS_USE_STATSD: 'true',
      STATSD_HOST: 'stats',
      FAIRVISOR_RLS_STATSD_HOST: 'mine',
      STATSD_PORT: '9125',
      FAIRVISOR_RLS_STATSD_PORT: '8126',
      STATS_FLUSH_INTERVAL: '5s',
      FAIRVISOR_RLS_STATS_FLUSH_INTERVAL_MS: '250',
    })
    assert.deepEqual(ours.rlsStatsd, { host: 'mine', port: 8126, intervalMs: 250 })
    assert.equal(s({ USE_STATSD: 'true', STATS_FLUSH_INTERVAL: '500ms' }).rlsStatsd?.intervalMs, 500)
    refusedAs({ STATS_FLUSH_INTERVAL: '10' }, 'STATS_FLUSH_INTERVAL', /not a duration/)
    refusedAs({ STATSD_PORT: '70000' }, 'STATSD_PORT')
  })

  test('FAIRVISOR_RLS_STATS_MAX_KEYS: 1000 by default', () => {
    assert.equal(s({}).rlsStatsMaxKeys, 1000)
    assert.equal(s({ FAIRVISOR_RLS_STATS_MAX_KEYS: '0' }).rlsStatsMaxKeys, 0)
  })
})

describe('unknown FAIRVISOR_* variables', () => {
  test('are refused, with the closest setting when one is near', () => {
    refusedAs({ FAIRVISOR_WORKER: '4' }, 'FAIRVISOR_WORKER', /did you mean FAIRVISOR_WORKERS\?/)
    refusedAs({ FAIRVISOR_LOGLEVEL: 'debug' }, 'FAIRVISOR_LOGLEVEL', /did you mean FAIRVISOR_LOG_LEVEL\?/)
    refusedAs({ FAIRVISOR_GRPC_IDEL_TIMEOUT_MS: '1' }, 'FAIRVISOR_GRPC_IDEL_TIMEOUT_MS', /did you mean FAIRVISOR_GRPC_IDLE_TIMEOUT_MS\?/)
    refusedAs({ FAIRVISOR_NOTHING_LIKE_IT: '1' }, 'FAIRVISOR_NOTHING_LIKE_IT', /not a setting; fairvisor --help lists the settings$/)
    refusedAs({ FAIRVISOR_ZZ: '1', FAIRVISOR_WORKR: '2' }, 'FAIRVISOR_WORKR', /nor are FAIRVISOR_ZZ$/)
  })

  test('closest: a few edits away, or none', () => {
    const known = ['FAIRVISOR_PORT', 'FAIRVISOR_ADMIN_PORT', 'FAIRVISOR_TRUSTED_PROXIES']
    assert.equal(closest('FAIRVISOR_ADMNI_PORT', known), 'FAIRVISOR_ADMIN_PORT')
    assert.equal(closest('FAIRVISOR_TRUSTED_PROXY', known), 'FAIRVISOR_TRUSTED_PROXIES')
    assert.equal(closest('FAIRVISOR_BACKEND', known), undefined)
  })

  test('Kubernetes service-link variables are accepted by name and value; the same names with other values are not', () => {
    loadSettings({
      ...base,
      FAIRVISOR_SERVICE_HOST: '10.96.0.10',
      FAIRVISOR_SERVICE_PORT: '80',
      FAIRVISOR_SERVICE_PORT_ADMIN: '9090',
      FAIRVISOR_PORT_80_TCP: 'tcp://10.96.0.10:80',
      FAIRVISOR_PORT_80_TCP_PROTO: 'tcp',
      FAIRVISOR_PORT_80_TCP_PORT: '80',
      FAIRVISOR_PORT_80_TCP_ADDR: '10.96.0.10',
      FAIRVISOR_REDIS_PORT: 'tcp://[fd00::11]:6379',
      FAIRVISOR_REDIS_SERVICE_HOST: 'fd00::11',
      FAIRVISOR_TEST_REDIS_URL: 'redis://127.0.0.1:6379',
    })
    refusedAs({ FAIRVISOR_ADMN_PORT: '9090' }, 'FAIRVISOR_ADMN_PORT', /did you mean FAIRVISOR_ADMIN_PORT\?/)
    refusedAs({ FAIRVISOR_SERVICE_HOST: 'yes' }, 'FAIRVISOR_SERVICE_HOST')
  })
})

describe('FAIRVISOR_TRUSTED_PROXIES', () => {
  test('a list covering every IPv4 or IPv6 address is refused', () => {
    for (const list of [
      '0.0.0.0/0',
      '::/0',
      '10.0.0.0/8,0.0.0.0/0',
      '0.0.0.0/1,128.0.0.0/1',
      '::/1, 8000::/1',
      // ::/1 holds the IPv4-mapped block, which BlockList matches IPv4 peers against
      '::/1',
      '::ffff:0:0/96',
      '::ffff:0.0.0.0/96',
      '::ffff:0:0/95',
      '0.0.0.0/2,64.0.0.0/2,128.0.0.0/2,192.0.0.0/3,224.0.0.0/3',
    ])
      refusedAs({ FAIRVISOR_TRUSTED_PROXIES: list }, 'FAIRVISOR_TRUSTED_PROXIES', /trusts every IPv[46] address/)
  })

  test('lists that leave addresses out are accepted', () => {
    for (const list of [
      '0.0.0.0/1',
      '10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,fd00::/8,::1,127.0.0.1',
      '8000::/1',
      '0.0.0.0/2,64.0.0.0/2,128.0.0.0/2,192.0.0.0/3',
      '::ffff:0:0/97',
      'fe80::1%eth0',
    ])
      assert.equal(loadSettings({ ...base, FAIRVISOR_TRUSTED_PROXIES: list }).trustedProxiesText, list)
  })
})

test('a debug session secret shorter than 32 characters is refused, as a signing key is', () => {
  refusedAs({ FAIRVISOR_DEBUG_SESSION_SECRET: 'x'.repeat(31) }, 'FAIRVISOR_DEBUG_SESSION_SECRET', /at least 32/)
  assert.equal(loadSettings({ ...base, FAIRVISOR_DEBUG_SESSION_SECRET: 'x'.repeat(32) }).debugSessionSecret, 'x'.repeat(32))
})

test('two listeners on one port are refused (0, a free port each, is not one port)', () => {
  refusedAs({ FAIRVISOR_PORT: '8080', FAIRVISOR_GRPC_PORT: '8080' }, 'FAIRVISOR_GRPC_PORT', /also FAIRVISOR_PORT/)
  refusedAs({ FAIRVISOR_ADMIN_PORT: '9090', FAIRVISOR_GRPC_PORT: '9090' }, 'FAIRVISOR_GRPC_PORT', /also FAIRVISOR_ADMIN_PORT/)
  refusedAs({ FAIRVISOR_ADMIN_PORT: '8080' }, 'FAIRVISOR_ADMIN_PORT', /also FAIRVISOR_PORT/)
  const free = loadSettings({ ...base, FAIRVISOR_PORT: '0', FAIRVISOR_ADMIN_PORT: '0', FAIRVISOR_GRPC_PORT: '0' })
  assert.deepEqual([free.port, free.adminPort, free.grpcPort], [0, 0, 0])
})

test('the gRPC timeouts default to the HTTP listener’s', () => {
  const s = loadSettings({ ...base, FAIRVISOR_KEEPALIVE_TIMEOUT_MS: '5000', FAIRVISOR_HEADERS_TIMEOUT_MS: '2000' })
  assert.deepEqual([s.grpcIdleTimeoutMs, s.grpcStreamTimeoutMs], [5000, 2000])
  const own = loadSettings({ ...base, FAIRVISOR_GRPC_IDLE_TIMEOUT_MS: '700', FAIRVISOR_GRPC_STREAM_TIMEOUT_MS: '300' })
  assert.deepEqual([own.grpcIdleTimeoutMs, own.grpcStreamTimeoutMs], [700, 300])
})
