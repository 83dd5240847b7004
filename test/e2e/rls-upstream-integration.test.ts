/**
 * envoyproxy/ratelimit's integration tests (test/integration/integration_test.go
 * with its runtime configuration files), its integration scripts
 * (integration-test/scripts/*.sh, against examples/ratelimit/config/example.yaml,
 * each Envoy request written as the descriptors Envoy's rate_limits actions in
 * examples/envoy/proxy.yaml make of it) and its README's configuration
 * examples, ported through the gateway on every store.
 * Sequences on fixed counters (a configured value, a share_threshold pattern)
 * run, when they must be retried because the clock crossed a window
 * boundary, on a copy of their domain (`<domain>-<attempt>`).
 * Not here: statistics (its stats assertions and the detailed_metric script's
 * Prometheus check), the local cache, per-second Redis, cache key prefix,
 * Redis auth/TLS/cluster/sentinel and Memcached variants, xDS, gRPC TLS and
 * its certificate reload, dynamic metadata (the multi-service script picks
 * the service itself here, from the statuses).
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import {
  assertReset,
  d,
  DAY,
  fixtures,
  fresh,
  HOUR,
  inOneWindow,
  lim,
  MAX_UINT32,
  MINUTE,
  OK,
  onStores,
  OVER_LIMIT,
  renamed,
  SECOND,
  st,
  type Descriptor,
  type Entries,
} from '../helpers/rls-upstream.js'

/** Copies of a file under `<domain>-<attempt>` for retried attempts (attempt 0 is the file itself). */
const ATTEMPTS = 6
function withCopies(files: Record<string, string>, name: string, domain: string): Record<string, string> {
  const text = files[name]!
  for (let i = 1; i < ATTEMPTS; i++) files[`copy-${domain}-${i}.yaml`] = renamed(text, `${domain}-${i}`)
  return files
}
const attemptOf = (domain: string, attempt: number): string => (attempt === 0 ? domain : `${domain}-${attempt}`)

/** example.yaml once per script that counts on its fixed values, each under a domain of its own. */
const SCRIPTS = ['replaces', 'quota', 'tokenquota', 'multiservice'] as const

function files(): Record<string, string> {
  const f = fixtures(
    'integration/basic.yaml',
    'integration/another.yaml',
    'integration/share_threshold.yaml',
    'examples/example.yaml',
    ...[1, 2, 3, 5, 6, 7, 8, '9-1', '9-2', '9-3', '10-1', '10-2', '11-1', '11-2'].map((n) => `readme/example${n}.yaml`),
  )
  const all: Record<string, string> = {}
  for (const [name, text] of Object.entries(f)) all[name] = text
  // Its example 4 shows two alternative files of one domain: the first under a name of its own.
  const four = fixtures('readme/example4-1.yaml', 'readme/example4-2.yaml')
  all['example4-1.yaml'] = renamed(four['example4-1.yaml']!, 'example4_flat')
  all['example4-2.yaml'] = four['example4-2.yaml']!
  for (const s of SCRIPTS) {
    all[`script-${s}.yaml`] = renamed(f['example.yaml']!, `rl-${s}`)
    withCopies(all, `script-${s}.yaml`, `rl-${s}`)
  }
  withCopies(all, 'share_threshold.yaml', 'share-threshold-test')
  withCopies(all, 'example11-1.yaml', 'example11')
  return all
}

const codes = (xs: Array<{ overall: number }>) => xs.map((x) => (x.overall === OK ? 'OK' : 'OVER_LIMIT'))

// Its example 9 is three files of one domain: merged.
onStores("envoyproxy/ratelimit's integration tests, scripts and README examples", { files, env: { MERGE_DOMAIN_CONFIG: 'true' } }, (g) => {
  const ask = (domain: string, descriptors: Descriptor[], hits?: number) => g().ask(domain, descriptors, hits)

  test('TestBasicConfig (testBasicBaseConfig): an unknown domain, 50 a second, 20 a minute then over, two keys of one domain, the reset counting down', async () => {
    const none = await ask('foo', [d([['hello', 'world']])])
    assert.deepEqual([none.overall, none.statuses], [OK, [st(OK)]])
    const basic = await ask('basic', [d([['key1', 'foo']])])
    assert.deepEqual([basic.overall, basic.statuses], [OK, [st(OK, lim(50, SECOND), 49)]])
    assert.deepEqual(basic.resets, [1])

    // A random key over a minute limit.
    await inOneWindow(60, async () => {
      const key2 = fresh('random')
      for (let i = 0; i < 25; i++) {
        const r = await ask('another', [d([['key2', key2]])])
        const s = i >= 20 ? st(OVER_LIMIT, lim(20, MINUTE), 0) : st(OK, lim(20, MINUTE), 20 - (i + 1))
        assert.deepEqual([r.overall, r.statuses], [s.code, [s]], `call ${i + 1}`)
        assertReset(r.resets[0], 60, r.at)
      }
    })

    // Two keys in the same domain: the hour limit goes over first; the minute one keeps counting.
    await inOneWindow(60, async () => {
      const v = fresh('random')
      for (let i = 0; i < 15; i++) {
        const r = await ask('another', [d([['key2', v]]), d([['key3', v]])])
        const over = i >= 10
        assert.deepEqual(
          [r.overall, r.statuses],
          [
            over ? OVER_LIMIT : OK,
            [st(OK, lim(20, MINUTE), 20 - (i + 1)), over ? st(OVER_LIMIT, lim(10, HOUR), 0) : st(OK, lim(10, HOUR), 10 - (i + 1))],
          ],
          `call ${i + 1}`,
        )
        assertReset(r.resets[1], 3600, r.at)
      }
    })

    // DurationUntilReset: what is left of the day, no more on a later call (upstream sleeps 2 s to see it less).
    await inOneWindow(86_400, async () => {
      const durTest = fresh('durTest')
      const first = await ask('another', [d([['key4', durTest]])])
      const second = await ask('another', [d([['key4', durTest]])])
      assertReset(first.resets[0], 86_400, first.at)
      assertReset(second.resets[0], 86_400, second.at)
      assert.ok(second.resets[0]! <= first.resets[0]!)
      assert.deepEqual(second.statuses, [st(OK, lim(20, DAY), 18)])
    })
  })

  test('TestBasicReloadConfig (testConfigReload): a file added to the directory loads, its removal reloads too', async () => {
    const gw = g()
    assert.deepEqual((await ask('reload', [d([['block', 'foo']])])).statuses, [st(OK)])
    const reload = fixtures('integration/reload.yaml')['reload.yaml']!
    assert.equal((await gw.change({ 'reload.yaml': reload })).msg, 'rls config loaded')
    await gw.until('reload', [['key1', 'probe']], (s) => s.limit !== undefined)
    const r = await ask('reload', [d([['key1', 'foo']])])
    assert.deepEqual([r.overall, r.statuses], [OK, [st(OK, lim(50, SECOND), 49)]])
    assert.deepEqual((await ask('reload', [d([['block', 'foo']])])).statuses, [st(OVER_LIMIT, lim(0, SECOND), 0)])
    // Removal of config files must trigger a reload.
    assert.equal((await gw.change({ 'reload.yaml': undefined })).msg, 'rls config loaded')
    await gw.until('reload', [['key1', 'probe']], (s) => s.limit === undefined)
  })

  test('TestShareThreshold: files/* shares one counter of 10 an hour; files_no_share/* counts each value alone', async () => {
    await inOneWindow(3600, async (attempt) => {
      const domain = attemptOf('share-threshold-test', attempt)
      for (let i = 0; i < 10; i++) {
        const r = await ask(domain, [d([['files', 'files/a.pdf']])])
        assert.ok([OK, OVER_LIMIT].includes(r.overall))
      }
      const b = await ask(domain, [d([['files', 'files/b.csv']])])
      assert.deepEqual([b.overall, b.statuses], [OVER_LIMIT, [st(OVER_LIMIT, lim(10, HOUR), 0)]])
      assertReset(b.resets[0], 3600, b.at)
    })
    for (let i = 0; i < 10; i++) {
      const r = await ask('share-threshold-test', [d([['files_no_share', fresh('files_no_share/')]])])
      assert.deepEqual([r.overall, r.statuses], [OK, [st(OK, lim(10, HOUR), 9)]])
    }
  })

  /** Envoy's /twoheader, /fourheader and /fiveheader actions: a descriptor per action whose headers are all present. */
  const envoyRequest = (h: Record<string, string>): Descriptor[] => {
    const actions: string[][] = [['foo', 'bar'], ['foo', 'baz'], ['source_cluster', 'destination_cluster'], ['category']]
    return actions.filter((a) => a.every((k) => k in h)).map((a) => d(a.map((k): [string, string] => [k, h[k]!])))
  }

  test('simple-get.sh: happy path', async () => {
    assert.equal((await ask('rl', envoyRequest({ foo: 'test', baz: 'shady' }))).overall, OK)
  })

  test('trigger-ratelimit.sh: (foo: *), (baz: not-so-shady) at 3 a minute: the 4th and 5th requests are limited', async () => {
    await inOneWindow(60, async () => {
      const h = { foo: fresh('pelle'), baz: 'not-so-shady' }
      const rs = []
      for (let i = 0; i < 5; i++) rs.push(await ask('rl', envoyRequest(h)))
      assert.deepEqual(codes(rs), ['OK', 'OK', 'OK', 'OVER_LIMIT', 'OVER_LIMIT'])
    })
  })

  test('trigger-shadow-mode-key.sh: (foo: *), (baz: shady) in shadow_mode never limits, and reports nothing left once over', async () => {
    await inOneWindow(60, async () => {
      const h = { foo: fresh('pelle'), baz: 'shady' }
      const rs = []
      for (let i = 0; i < 6; i++) rs.push(await ask('rl', envoyRequest(h)))
      assert.deepEqual(codes(rs), ['OK', 'OK', 'OK', 'OK', 'OK', 'OK'])
      assert.deepEqual(
        rs.map((r) => r.statuses[0]!.remaining),
        [2, 1, 0, 0, 0, 0],
      )
    })
  })

  test('value-included-in-stats-key-when-unspecified.sh: (unspec: *) at 2 a minute, the 3rd is limited (its statistic not ported)', async () => {
    await inOneWindow(60, async () => {
      const unspec = fresh('unspecified_value')
      const rs = []
      for (let i = 0; i < 3; i++) rs.push(await ask('rl', [d([['unspec', unspec]])]))
      assert.deepEqual(codes(rs), ['OK', 'OK', 'OVER_LIMIT'])
    })
  })

  test('replaces.sh: a limit that replaces a named one raises it, leaves the original untouched, and can replace several', async () => {
    await inOneWindow(60, async (attempt) => {
      const domain = attemptOf('rl-replaces', attempt)
      const steps: Array<[Record<string, string>, 'OK' | 'OVER_LIMIT']> = []
      const proxy = (dst: string) => ({ source_cluster: 'proxy', destination_cluster: dst })
      const banned = { foo: 'bkthomps', bar: 'banned' }
      // replaces increases the limit: banned_limit (0 a minute) replaced by override (2 a minute).
      steps.push([banned, 'OVER_LIMIT'], [{ ...banned, ...proxy('mock') }, 'OVER_LIMIT'])
      steps.push([{ ...banned, ...proxy('override') }, 'OK'], [{ ...banned, ...proxy('override') }, 'OK'])
      steps.push([{ ...banned, ...proxy('override') }, 'OVER_LIMIT'])
      // replaces does not affect the original limit (bkthomps, 1 a minute).
      const mine = { foo: 'my_foo', bar: 'bkthomps' }
      steps.push([{ ...mine, ...proxy('bkthomps') }, 'OK'], [{ ...mine, ...proxy('bkthomps') }, 'OK'])
      steps.push([{ ...mine, ...proxy('bkthomps') }, 'OVER_LIMIT'])
      steps.push([{ ...mine, ...proxy('not_bkthomps') }, 'OK'], [{ ...mine, ...proxy('not_bkthomps') }, 'OVER_LIMIT'])
      steps.push([{ ...mine, ...proxy('bkthomps') }, 'OVER_LIMIT'])
      // replaces can replace several: account (4 a minute) replaces bkthomps and fake_name.
      const five = { ...mine, ...proxy('fake'), category: 'account' }
      for (let i = 0; i < 4; i++) steps.push([five, 'OK'])
      steps.push([five, 'OVER_LIMIT'])
      steps.push([{ foo: 'foo_2', bar: 'bkthomps' }, 'OK'], [{ foo: 'foo_2', bar: 'bkthomps' }, 'OVER_LIMIT'])
      const three = { foo: 'foo_3', bar: 'bar_3', ...proxy('fake') }
      steps.push([three, 'OK'], [three, 'OK'], [three, 'OVER_LIMIT'])
      steps.push([five, 'OVER_LIMIT'])
      const got = []
      for (const [h] of steps) got.push(codes([await ask(domain, envoyRequest(h))])[0])
      assert.deepEqual(
        got,
        steps.map(([, c]) => c),
      )
    })
  })

  test('quota.sh: two quota_mode services (1 and 2 a minute) charged on every request; the 3rd, both over, is limited', async () => {
    await inOneWindow(60, async (attempt) => {
      const domain = attemptOf('rl-quota', attempt)
      const request = [d([['service', 'service_1']]), d([['service', 'service_2']])]
      const rs = []
      for (let i = 0; i < 3; i++) rs.push(await ask(domain, request))
      assert.deepEqual(codes(rs), ['OK', 'OK', 'OVER_LIMIT'])
      assert.deepEqual(
        rs[1]!.statuses.map((s) => s.code),
        [OVER_LIMIT, OK],
        'one quota over alone does not limit',
      )
    })
  })

  test('token-quota.sh: a check of 0 hits on the request path, a charge of 1 on the response path: the 4th request is limited', async () => {
    await inOneWindow(60, async (attempt) => {
      const domain = attemptOf('rl-tokenquota', attempt)
      const service: Entries = [['service', 'service_2']]
      const checks = []
      for (let i = 0; i < 4; i++) {
        checks.push(await ask(domain, [d(service, 0)]))
        await ask(domain, [d(service, 1)]) // apply_on_stream_done
      }
      assert.deepEqual(codes(checks), ['OK', 'OK', 'OK', 'OVER_LIMIT'])
    })
  })

  test('multiservice-tokenquota.sh: requests go to service_1 while it has quota, then service_2; the 6th is limited', async () => {
    await inOneWindow(60, async (attempt) => {
      const domain = attemptOf('rl-multiservice', attempt)
      const served = []
      for (let i = 0; i < 6; i++) {
        const check = await ask(domain, [d([['service', 'service_1']], 0), d([['service', 'service_2']], 0)])
        if (check.overall !== OK) {
          served.push('limited')
          continue
        }
        // Envoy routes by the dynamic metadata of the service with quota left; here, the first status OK.
        const service = check.statuses[0]!.code === OK ? 'service_1' : 'service_2'
        served.push(service)
        await ask(domain, [d([['service', service]], 1)])
      }
      assert.deepEqual(served, ['service_1', 'service_1', 'service_2', 'service_2', 'service_2', 'limited'])
    })
  })

  test('README examples 1 to 5: matching, nesting, most specific value first, levels, unlimited', async () => {
    const one = async (domain: string, entries: Entries, hits?: number) => (await ask(domain, [d(entries, hits)])).statuses[0]
    assert.deepEqual(await one('mongo_cps', [['database', 'users']]), st(OK, lim(500, SECOND), 499))
    assert.deepEqual(await one('mongo_cps', [['database', 'default']]), st(OK, lim(500, SECOND), 499))
    assert.deepEqual(await one('mongo_cps', [['database', 'other']]), st(OK))
    // Example 2: 5 marketing messages a day to one number, 100 a day to any number, each number its own.
    await inOneWindow(86_400, async () => {
      for (const number of [fresh('2061111111'), fresh('2062222222')]) {
        const call = () =>
          ask('messaging', [
            d([
              ['message_type', 'marketing'],
              ['to_number', number],
            ]),
            d([['to_number', number]]),
          ])
        for (let i = 1; i <= 5; i++)
          assert.deepEqual((await call()).statuses, [st(OK, lim(5, DAY), 5 - i), st(OK, lim(100, DAY), 100 - i)], `message ${i}`)
        const sixth = await call()
        assert.deepEqual([sixth.overall, sixth.statuses], [OVER_LIMIT, [st(OVER_LIMIT, lim(5, DAY), 0), st(OK, lim(100, DAY), 94)]])
      }
    })
    // Example 3: key/value is tried before key alone.
    const ip = fresh('50.0.0.1')
    const r3 = await ask('edge_proxy_per_ip', [d([['remote_address', ip]], 10), d([['remote_address', '50.0.0.5']])])
    assert.deepEqual(r3.statuses, [st(OK, lim(10, SECOND), 0), st(OVER_LIMIT, lim(0, SECOND), 0)])
    // Example 4: as many entries as nested levels, or no match.
    const two: Entries = [
      ['key', 'value'],
      ['subkey', 'subvalue'],
    ]
    assert.deepEqual(await one('example4_flat', two), st(OK))
    assert.deepEqual(await one('example4', two), st(OK, lim(300, SECOND), 299))
    // Example 5: unlimited, answered without the store.
    assert.deepEqual(await one('internal', [['ldap', 'x']], 1_000_000), st(OK, undefined, MAX_UINT32))
    assert.deepEqual(await one('internal', [['azure', fresh('x')]]), st(OK, lim(100, MINUTE), 99))
  })

  test('README examples 6 to 11: shadow_mode, replaces, detailed_metric, wildcards anywhere, value_to_metric, share_threshold', async () => {
    // Example 6: user-a in shadow_mode is never limited; user-b is at 20 a second.
    const six = await ask('example6', [
      d(
        [
          ['service', 'auth-service'],
          ['user', 'user-a'],
        ],
        11,
      ),
      d(
        [
          ['service', 'auth-service'],
          ['user', 'user-b'],
        ],
        21,
      ),
    ])
    assert.deepEqual(six.statuses, [st(OK, lim(10, SECOND), 0), st(OVER_LIMIT, lim(20, SECOND), 0)])
    // Example 7: with both, the replacing limit alone applies and the replaced one is not counted.
    const k1 = d([
      ['key_1', 'value_1'],
      ['user', 'bkthomps'],
    ])
    const k2 = d([
      ['key_2', 'value_2'],
      ['user', 'bkthomps'],
    ])
    assert.deepEqual((await ask('example7', [k1, k2])).statuses, [st(OK), st(OK, lim(10, SECOND), 9)])
    assert.deepEqual((await ask('example7', [k1])).statuses, [st(OK, lim(5, SECOND, 'specific_limit'), 4)])
    // Example 8: an unspecified value counts at 10, value1 at 20 (its metrics not ported).
    const eight = await ask('example8', [d([['key1', fresh('unspecified_value')]]), d([['key1', 'value1']])])
    assert.deepEqual(eight.statuses, [st(OK, lim(10, MINUTE), 9), st(OK, lim(20, MINUTE), 19)])
    // Example 9: trailing, middle and repeated wildcards.
    const nine = await ask('example9', [
      d([['key1', 'value1']]),
      d([['key1', 'valueXYZ']]),
      d([['path', '/api/123/action']]),
      d([['path', '/api/user-id/action']]),
      d([['path', '/api/123/other']]),
      d([['route', '/api/v1/resource/123/action']]),
      d([['route', '/api/v2/resource/456/action']]),
    ])
    const w = st(OK, lim(20, MINUTE), 19)
    assert.deepEqual(nine.statuses, [w, w, w, w, st(OK), w, w])
    // Example 10: value_to_metric does not change the limits.
    const ten = await ask('example10', [
      d([
        ['route', 'api'],
        ['http_method', 'GET'],
        ['subject_id', '123'],
      ]),
    ])
    assert.deepEqual(ten.statuses, [st(OK, lim(60, MINUTE), 59)])
    const tenWild = await ask('example10_wildcard', [
      d([
        ['user', 'alice'],
        ['action', 'readfile'],
        ['resource', 'documents'],
      ]),
    ])
    assert.deepEqual(tenWild.statuses, [st(OK, lim(100, MINUTE), 99)])
    // Example 11: 5 for files/a.pdf and 5 for files/b.csv use up files/*; files_no_share/* values count alone.
    await inOneWindow(3600, async (attempt) => {
      const domain = attemptOf('example11', attempt)
      const rs = []
      for (const f of ['files/a.pdf', 'files/b.csv']) for (let i = 0; i < 5; i++) rs.push(await ask(domain, [d([['files', f]])]))
      rs.push(await ask(domain, [d([['files', 'files/c.txt']])]))
      assert.deepEqual(codes(rs), [...Array(10).fill('OK'), 'OVER_LIMIT'])
      const a = fresh('files_no_share/a')
      const own = await ask(domain, [d([['files_no_share', a]], 10)])
      assert.deepEqual(own.statuses, [st(OK, lim(10, HOUR), 0)])
      assert.deepEqual((await ask(domain, [d([['files_no_share', fresh('files_no_share/b')]])])).statuses, [st(OK, lim(10, HOUR), 9)])
    })
    const metrics = await ask('example11_metrics', [
      d([
        ['route', 'api/v1'],
        ['method', 'GET'],
      ]),
    ])
    assert.deepEqual(metrics.statuses, [st(OK, lim(60, MINUTE), 59)])
  })
})
