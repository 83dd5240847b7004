/**
 * envoyproxy/ratelimit's config tests (test/config/config_test.go), ported:
 * its valid YAML files served by the gateway, each descriptor answered with
 * the limit its tests read from the file (or none), and its invalid files
 * refused on reload with its messages while the last good configuration
 * stays; on every store. Its files are loaded side by side, each under a
 * domain of its own (they all say `test-domain`), except the two files its
 * domain-merge test merges (MERGE_DOMAIN_CONFIG is on here).
 * Not here: statistics keys (detailed_metric, value_to_metric) and the
 * per-descriptor limit override (TestConfigLimitOverride).
 */
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { test } from 'node:test'
import {
  assertReset,
  d,
  DAY,
  fixtures,
  HOUR,
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
  type Status,
} from '../helpers/rls-upstream.js'

const UNIT_S: Record<number, number> = { [SECOND]: 1, [MINUTE]: 60, [HOUR]: 3600, [DAY]: 86_400 }

/** Its TestDetailedMetric and TestValueToMetric_* configurations (Go structs there), as YAML, one domain each. */
const DETAILED = `
domain: nested_flat
descriptors:
  - key: key-1
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 100}
    descriptors:
      - key: key-2
        detailed_metric: true
        rate_limit: {unit: minute, requests_per_unit: 5}
---
domain: nested
descriptors:
  - key: key_1
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 500}
  - key: key_1
    value: some-value-for-key-1
    rate_limit: {unit: minute, requests_per_unit: 500}
  - key: key_2
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 5000}
    descriptors:
      - key: key_3
        detailed_metric: true
      - key: key_3
        value: requested-key3-value
        detailed_metric: true
        rate_limit: {unit: minute, requests_per_unit: 5}
  - key: key_2
    value: specific-id
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 50000}
    descriptors:
      - key: key_3
        detailed_metric: true
      - key: key_3
        value: requested-key3-value
        detailed_metric: true
        rate_limit: {unit: minute, requests_per_unit: 100}
---
domain: value_to_metric
descriptors:
  - key: route
    value_to_metric: true
    descriptors:
      - key: http_method
        value_to_metric: true
        descriptors:
          - key: subject_id
            rate_limit: {unit: minute, requests_per_unit: 60}
---
domain: d
descriptors:
  - key: k1
    value_to_metric: true
    descriptors:
      - key: k2
        rate_limit: {unit: second, requests_per_unit: 1}
  - key: x1
    descriptors:
      - key: x2
        value_to_metric: true
        descriptors:
          - key: x3
            rate_limit: {unit: second, requests_per_unit: 1}
---
domain: configured_values
descriptors:
  - key: route
    value_to_metric: true
    descriptors:
      - key: http_method
        value: GET
        value_to_metric: true
        descriptors:
          - key: subject_id
            rate_limit: {unit: minute, requests_per_unit: 60}
      - key: http_method
        value: POST
        value_to_metric: true
        descriptors:
          - key: subject_id
            rate_limit: {unit: minute, requests_per_unit: 30}
---
domain: with_wildcard
descriptors:
  - key: user
    value_to_metric: true
    descriptors:
      - key: action
        value: read*
        value_to_metric: true
        descriptors:
          - key: resource
            rate_limit: {unit: minute, requests_per_unit: 100}
`

const FILES = (): Record<string, string> => {
  const f = fixtures(
    'basic_config.yaml',
    'shadowmode_config.yaml',
    'metadata.yaml',
    'wildcard.yaml',
    'share_threshold.yaml',
    'merge_domain_key1.yaml',
    'merge_domain_key2.yaml',
  )
  return {
    'basic_config.yaml': renamed(f['basic_config.yaml']!, 'basic'),
    'shadowmode_config.yaml': renamed(f['shadowmode_config.yaml']!, 'shadowmode'),
    'metadata.yaml': renamed(f['metadata.yaml']!, 'metadata'),
    'wildcard.yaml': renamed(f['wildcard.yaml']!, 'wildcard'),
    'share_threshold.yaml': renamed(f['share_threshold.yaml']!, 'share_threshold'),
    'merge_domain_key1.yaml': f['merge_domain_key1.yaml']!,
    'merge_domain_key2.yaml': f['merge_domain_key2.yaml']!,
    'detailed_metric.yaml': DETAILED,
  }
}

/** Descriptors and the status each must get, asked in one call (one store call: one time for every window). */
type Expect = Array<[Descriptor, Status]>
const expectAll = (cases: Expect) => ({ descriptors: cases.map(([x]) => x), statuses: cases.map(([, s]) => s) })

onStores("envoyproxy/ratelimit's config tests", { files: FILES, env: { MERGE_DOMAIN_CONFIG: 'true' } }, (g) => {
  /** One call; asserts every status and, for a limited one, its duration_until_reset in its unit. */
  const check = async (domain: string, cases: Expect): Promise<number> => {
    const { descriptors, statuses } = expectAll(cases)
    const r = await g().ask(domain, descriptors)
    assert.deepEqual(r.statuses, statuses)
    r.statuses.forEach((s, i) => {
      if (s.limit) assertReset(r.resets[i], UNIT_S[s.limit.unit]!, r.at, `status ${i}`)
    })
    return r.overall
  }

  test('TestBasicConfig: the limit of each descriptor, none where the file has none, unlimited', async () => {
    assert.deepEqual((await g().ask('foo_domain', [d([])])).statuses, [st(OK)], 'an unknown domain: no limit')
    const overall = await check('basic', [
      [d([]), st(OK)],
      [d([['key1', 'something']]), st(OK)],
      [d([['key1', 'value1']]), st(OK)],
      [
        d([
          ['key2', 'value2'],
          ['subkey', 'subvalue'],
        ]),
        st(OK),
      ],
      [
        d([
          ['key5', 'value5'],
          ['subkey5', 'subvalue'],
        ]),
        st(OK),
      ],
      [
        d([
          ['key1', 'value1'],
          ['subkey1', 'something'],
        ]),
        st(OK, lim(5, SECOND), 4),
      ],
      [
        d([
          ['key1', 'value1'],
          ['subkey1', 'subvalue1'],
        ]),
        st(OK, lim(10, SECOND), 9),
      ],
      [d([['key2', 'something']]), st(OK, lim(20, MINUTE), 19)],
      [d([['key2', 'value2']]), st(OK, lim(30, MINUTE), 29)],
      [d([['key2', 'value3']]), st(OK)],
      [d([['key3', 'foo']]), st(OK, lim(1, HOUR), 0)],
      [d([['key4', 'foo']]), st(OK, lim(1, DAY, 'key4_rate_limit'), 0)],
      [d([['key6', 'foo']]), st(OK, undefined, MAX_UINT32)],
      [d([['key7', 'unspecified_value']]), st(OK, lim(70, MINUTE), 69)],
      [d([['key7', 'another_value']]), st(OK, lim(70, MINUTE), 69)],
    ])
    assert.equal(overall, OK)
  })

  test('TestDomainMerge: one domain from two files, MERGE_DOMAIN_CONFIG=true', async () => {
    await check('test-domain', [
      [d([]), st(OK)],
      [d([['key1', 'value1']]), st(OK, lim(10, MINUTE), 9)],
      [d([['key2', 'value2']]), st(OK, lim(20, MINUTE), 19)],
    ])
    assert.deepEqual((await g().ask('foo_domain', [d([['key1', 'value1']])])).statuses, [st(OK)])
  })

  test('TestShadowModeConfig: a shadow_mode limit over is OK with nothing left; the others are OVER_LIMIT', async () => {
    const overall = await check('shadowmode', [
      [
        d(
          [
            ['key1', 'value1'],
            ['subkey1', 'something'],
          ],
          6,
        ),
        st(OVER_LIMIT, lim(5, SECOND), 0),
      ],
      [
        d(
          [
            ['key1', 'value1'],
            ['subkey1', 'subvalue1'],
          ],
          11,
        ),
        st(OK, lim(10, SECOND), 0),
      ],
      [d([['key2', 'something']], 21), st(OK, lim(20, MINUTE), 0)],
      [d([['key2', 'value2']], 31), st(OVER_LIMIT, lim(30, MINUTE), 0)],
      [d([['key2', 'under']], 1), st(OK, lim(20, MINUTE), 19)],
    ])
    assert.equal(overall, OVER_LIMIT)
    assert.equal(await check('shadowmode', [[d([['key2', 'alone']], 25), st(OK, lim(20, MINUTE), 0)]]), OK, 'shadow alone: OK')
  })

  test('TestWildcardConfig: trailing, middle and repeated wildcards match; each matched value counts alone', async () => {
    const w20 = (left = 19) => st(OK, lim(20, MINUTE), left)
    await check('wildcard', [
      [d([['noVal', 'foo1']]), w20()],
      [d([['noVal', 'foo2']]), w20()],
      [d([['wild', 'foo1']]), w20()],
      [d([['wild', 'foo2']]), w20()],
      [
        d([
          ['nestedWild', 'val1'],
          ['wild', 'goo2'],
        ]),
        w20(),
      ],
      [d([['wild', 'bar']]), st(OK)],
      [d([['noWild', 'foo1']]), st(OK)],
      [d([['midWild', 'barab']]), w20()],
      [d([['midWild', 'bar123b']]), w20()],
      [d([['midWild', 'barb']]), w20()],
      [d([['midWild', 'bara']]), st(OK)],
      [d([['midWild', 'xbarb']]), st(OK)],
      [d([['multiWild', 'foo123bar456baz']]), st(OK, lim(10, MINUTE), 9)],
      [d([['multiWild', 'foobarbaz']]), st(OK, lim(10, MINUTE), 9)],
      [d([['multiWild', 'foo123baz']]), st(OK)],
      [d([['multiWild', 'bar456baz']]), st(OK)],
    ])
  })

  test('TestShareThreshold: every value a share_threshold wildcard matches draws on one counter; an exact value on its own', async () => {
    const shared = (n: number, limit: number) => Array.from({ length: n }, (_, i) => st(OK, lim(limit, MINUTE), limit - 1 - i))
    const one = (entries: Array<[string, string]>, s: Status): [Descriptor, Status] => [d(entries), s]
    const group = (limit: number, ...entries: Array<Array<[string, string]>>): Expect => {
      const s = shared(entries.length, limit)
      return entries.map((e, i) => one(e, s[i]!))
    }
    await check('share_threshold', [
      // Case 1, and its cache-key test: files/* for every file.
      ...group(100, [['files', 'files/a.pdf']], [['files', 'files/b.csv']], [['files', 'files/c.txt']], [['files', 'files/subdir/f.txt']]),
      // Case 2: share_threshold beside value_to_metric and detailed_metric.
      ...group(
        60,
        [
          ['route', 'api/v1'],
          ['method', 'GET'],
        ],
        [
          ['route', 'api/v2'],
          ['method', 'GET'],
        ],
      ),
      ...group(
        80,
        [
          ['service', 'svc/user'],
          ['endpoint', 'get'],
        ],
        [
          ['service', 'svc/order'],
          ['endpoint', 'get'],
        ],
      ),
      // Case 3: nested, at the second level, at both, mixed with a plain wildcard (which counts per value).
      ...group(
        200,
        [
          ['nested', 'parent'],
          ['files', 'nested/file1.txt'],
        ],
        [
          ['nested', 'parent'],
          ['files', 'nested/file2.csv'],
        ],
      ),
      ...group(
        300,
        [
          ['files', 'top/file1.txt'],
          ['files', 'nested/file1.txt'],
        ],
        [
          ['files', 'top/file2.pdf'],
          ['files', 'nested/sub2.csv'],
        ],
      ),
      ...group(
        120,
        [
          ['path', 'path/foo'],
          ['file', 'file/doc1'],
          ['type', 'pdf'],
        ],
        [
          ['path', 'path/bar'],
          ['file', 'file/doc1'],
          ['type', 'pdf'],
        ],
      ),
      one(
        [
          ['path', 'path/foo'],
          ['file', 'file/doc2'],
          ['type', 'pdf'],
        ],
        st(OK, lim(120, MINUTE), 119),
      ),
      ...group(
        150,
        [
          ['user', 'user/alice'],
          ['resource', 'res/file1'],
          ['action', 'read'],
        ],
        [
          ['user', 'user/bob'],
          ['resource', 'res/file2'],
          ['action', 'read'],
        ],
      ),
      // Case 4: file_test1 alone at 50; test2, test23, test123 share test* at 100.
      one([['file', 'test1']], st(OK, lim(50, MINUTE), 49)),
      ...group(100, [['file', 'test2']], [['file', 'test23']], [['file', 'test123']]),
      one([['file', 'test1']], st(OK, lim(50, MINUTE), 48)),
      // Cases 5 to 8: middle and repeated wildcards; values missing a literal part do not match.
      ...group(100, [['midpath', '/api/v1']], [['midpath', '/api-beta-v1']], [['midpath', '/apiXYZv1']]),
      one([['midpath', '/api/v2']], st(OK)),
      ...group(50, [['multiroute', 'svcAepBrpc']], [['multiroute', 'svcXXXepYYYrpc']], [['multiroute', 'svceprpc']]),
      one([['multiroute', 'svcABCrpc']], st(OK)),
      ...group(80, [['midroute', '/api/v2']], [['midroute', '/api-beta-v2']]),
      ...group(
        60,
        [
          ['tenant', 't1prod'],
          ['resource', 'resAv2'],
        ],
        [
          ['tenant', 't99prod'],
          ['resource', 'resBBBv2'],
        ],
      ),
    ])
  })

  test('TestMetadata: a file with metadata loads and limits as written (the metadata in the answer is not ported)', async () => {
    await check('metadata', [
      [
        d([
          ['key1', 'value1'],
          ['subkey1', 'something'],
        ]),
        st(OK, lim(5, SECOND), 4),
      ],
      [d([['key2', 'something']]), st(OK, lim(20, MINUTE), 19)],
    ])
  })

  test('TestDetailedMetric, TestValueToMetric_*: detailed_metric and value_to_metric do not change which limit applies', async () => {
    await check('nested_flat', [
      [d([['key-1', 'value-1']]), st(OK, lim(100, MINUTE), 99)],
      [
        d([
          ['key-1', 'value-1'],
          ['key-2', 'value-2'],
        ]),
        st(OK, lim(5, MINUTE), 4),
      ],
    ])
    await check('nested', [
      [d([['key_1', 'value-for-key-1']]), st(OK, lim(500, MINUTE), 499)],
      [d([['key_2', 'key-2-value']]), st(OK, lim(5000, MINUTE), 4999)],
      [
        d([
          ['key_2', 'key-2-value'],
          ['key_3', 'requested-key3-value'],
        ]),
        st(OK, lim(5, MINUTE), 4),
      ],
      [
        d([
          ['key_2', 'specific-id'],
          ['key_3', 'requested-key3-value'],
        ]),
        st(OK, lim(100, MINUTE), 99),
      ],
    ])
    const three = (a: string, b: string, c: string): Descriptor =>
      d([
        ['route', a],
        ['http_method', b],
        ['subject_id', c],
      ])
    await check('value_to_metric', [
      [three('draw', 'GET', '123'), st(OK, lim(60, MINUTE), 59)],
      [three('', 'GET', '123'), st(OK, lim(60, MINUTE), 59)],
      [three('', '', '123'), st(OK, lim(60, MINUTE), 59)],
    ])
    await check('d', [
      [
        d([
          ['k1', 'A'],
          ['k2', 'foo'],
        ]),
        st(OK, lim(1, SECOND), 0),
      ],
      [
        d([
          ['x1', 'X'],
          ['x2', 'Y'],
          ['x3', 'Z'],
        ]),
        st(OK, lim(1, SECOND), 0),
      ],
    ])
    await check('configured_values', [
      [three('api', 'GET', 'user123'), st(OK, lim(60, MINUTE), 59)],
      [three('api', 'POST', 'user456'), st(OK, lim(30, MINUTE), 29)],
    ])
    await check('with_wildcard', [
      [
        d([
          ['user', 'alice'],
          ['action', 'readfile'],
          ['resource', 'documents'],
        ]),
        st(OK, lim(100, MINUTE), 99),
      ],
      [
        d([
          ['user', 'bob'],
          ['action', 'readdata'],
          ['resource', 'database'],
        ]),
        st(OK, lim(100, MINUTE), 99),
      ],
    ])
  })

  test('TestEmptyDomain … TestUnlimitedWithRateLimitUnit, TestDuplicateKeyDomainMerge: each invalid file refused with its message, the last good configuration staying', async () => {
    const gw = g()
    // Its invalid files all say test-domain: alone beside a file of another domain, each meets only its own fault.
    const loaded = await gw.change({ ...Object.fromEntries(Object.keys(FILES()).map((f) => [f, undefined])), 'probe.yaml': PROBE })
    assert.equal(loaded.msg, 'rls config loaded')
    await gw.until('probe', [['gen', 'x']], (s) => s.limit?.requests_per_unit === 7)
    const bad = fixtures(...REFUSED.map(([f]) => f), 'merge_domain_key1.yaml')
    let previous: string | undefined
    const cases = [...REFUSED.map(([file, message]) => ({ file, message, twice: false })), MERGE_TWICE]
    for (const { file, message, twice } of cases) {
      const files: Record<string, string | undefined> = twice
        ? { 'merge_domain_key1.yaml': bad['merge_domain_key1.yaml'], [file]: bad['merge_domain_key1.yaml'] }
        : { [file]: bad[file] }
      if (previous !== undefined && previous !== file) files[previous] = undefined
      const line = await gw.change(files)
      previous = file
      assert.match(String(line.msg), /^rls config rejected/, file)
      const got = (line.err as { message: string }).message
      const want = `${join(gw.dir, file)}: ${message}`
      assert.ok(got.startsWith(want) && (message.endsWith(': ') || /^( \(at [^)]+\))?$/.test(got.slice(want.length))), `${file}: "${got}"`)
      assert.equal((await gw.ask('probe', [d([['gen', 'x']], 0)])).statuses[0]?.limit?.requests_per_unit, 7, 'the last good one stays')
    }
    assert.equal((await gw.change({ [previous!]: undefined, 'merge_domain_key1.yaml': undefined })).msg, 'rls config loaded')
  })
})

const PROBE = 'domain: probe\ndescriptors:\n  - key: gen\n    rate_limit: {unit: day, requests_per_unit: 7}\n'
/** TestDuplicateKeyDomainMerge: one file loaded twice, merged: the second copy repeats its descriptor. */
const MERGE_TWICE = {
  file: 'merge_domain_key1_copy.yaml',
  message: "duplicate descriptor composite key 'test-domain.key1_value1'",
  twice: true,
}

/** Its invalid files and the message each is refused with (TestBadYaml: then its parser's words, not ours). */
const REFUSED: ReadonlyArray<readonly [string, string]> = [
  ['empty_domain.yaml', 'config file cannot have empty domain'],
  ['empty_key.yaml', 'descriptor has empty key'],
  ['duplicate_key.yaml', "duplicate descriptor composite key 'test-domain.key1_value1'"],
  ['bad_limit_unit.yaml', "invalid rate limit unit 'foo'"],
  ['replaces_self.yaml', 'replaces should not contain name of same descriptor'],
  ['replaces_empty.yaml', 'should not have an empty replaces entry'],
  ['bad_yaml.yaml', 'error loading config file: '],
  ['misspelled_key.yaml', "config error, unknown key 'ratelimit'"],
  ['misspelled_key2.yaml', "config error, unknown key 'requestsperunit'"],
  ['non_string_key.yaml', 'config error, key is not of type string: 0.25'],
  ['non_map_list.yaml', 'config error, yaml file contains list of type other than map: a'],
  ['unlimited_with_unit.yaml', 'should not specify rate limit unit when unlimited'],
]
