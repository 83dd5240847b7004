/** envoyproxy/ratelimit YAML: what loads, what is refused, and which limit a descriptor gets. */
import assert from 'node:assert/strict'
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { loadRlsConfig, parseRlsYaml, RlsConfigError, type RlsNode } from '../../../src/grpc/rls-config.js'
import { matchLimit } from '../../../src/grpc/rls-match.js'
import { loadSettings } from '../../../src/settings.js'
import { ROOT } from '../../helpers/processes.js'

const YAML = `
domain: d
descriptors:
  - key: a
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: a
    value: exact
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: a
    value: pre*
    rate_limit: {unit: day, requests_per_unit: 3}
  - key: parent
    value: p
    descriptors:
      - key: child
        rate_limit: {unit: second, requests_per_unit: 4}
`
const domain = parseRlsYaml(YAML, 'test.yaml').get('d')!
const rpu = (entries: Array<[string, string]>): number | undefined =>
  matchLimit(
    domain,
    entries.map(([key, value]) => ({ key, value })),
  )?.requestsPerUnit

test('exact value first, then a wildcard value, then the key-only default', () => {
  assert.equal(rpu([['a', 'exact']]), 2)
  assert.equal(rpu([['a', 'prefix-1']]), 3)
  assert.equal(rpu([['a', 'other']]), 1)
  assert.equal(rpu([['b', 'x']]), undefined)
})

test('the limit is the one the last entry lands on; a deeper request than the configuration has none', () => {
  assert.equal(
    rpu([
      ['parent', 'p'],
      ['child', 'c'],
    ]),
    4,
  )
  assert.equal(rpu([['parent', 'p']]), undefined)
  assert.equal(
    rpu([
      ['parent', 'q'],
      ['child', 'c'],
    ]),
    undefined,
  )
  assert.equal(
    rpu([
      ['a', 'other'],
      ['child', 'c'],
    ]),
    undefined,
  )
})

test('refused with a message naming the place: unknown unit, missing key, duplicates, unlimited with a unit, no domain', () => {
  const bad: Array<[string, RegExp]> = [
    [
      'domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n',
      /^f\.yaml: invalid rate limit unit 'fortnight' \(at d\.descriptors\[0\]; one of second, /,
    ],
    ['domain: d\ndescriptors:\n  - value: v\n', /^f\.yaml: descriptor has empty key \(at d\.descriptors\[0\]\)$/],
    ['domain: d\ndescriptors:\n  - key: k\n  - key: k\n', /duplicate descriptor composite key 'd\.k'/],
    [
      'domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true, unit: second}\n',
      /should not specify rate limit unit when unlimited/,
    ],
    [
      'domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: -1}\n',
      /requests_per_unit must be an integer/,
    ],
    ['descriptors: []\n', /config file cannot have empty domain/],
    ['domain: d\n---\ndomain: d\n', /duplicate domain 'd' in config file/],
    ['domain: [unclosed\n', /f\.yaml: error loading config file: /],
  ]
  for (const [text, message] of bad)
    assert.throws(
      () => parseRlsYaml(text, 'f.yaml'),
      (e: Error) => e instanceof RlsConfigError && message.test(e.message),
      text,
    )
})

test('units are case-insensitive and week, month and year are accepted', () => {
  const c = parseRlsYaml(
    'domain: u\ndescriptors:\n  - key: w\n    rate_limit: {unit: WEEK, requests_per_unit: 7}\n  - key: m\n    rate_limit: {unit: month, requests_per_unit: 1}\n',
    'u.yaml',
  )
  assert.equal(matchLimit(c.get('u')!, [{ key: 'w', value: 'x' }])?.unit, 'week')
})

const UPSTREAM = join(ROOT, 'test/fixtures/rls/upstream')
const parseFixtures = (...names: string[]) => {
  const into = new Map()
  for (const n of names) parseRlsYaml(readFileSync(join(UPSTREAM, n), 'utf8'), n, into)
  return into
}

/**
 * What envoyproxy/ratelimit's own config tests (test/config/config_test.go) expect of its invalid
 * files: `<file>: <its message>`, word for word; the place in the file may follow in parentheses.
 * Its bad_yaml.yaml message ends with its YAML parser's own wording, which ours does not share.
 */
test("envoyproxy/ratelimit's invalid configurations are refused with its messages", () => {
  const cases: Array<[string[], string]> = [
    [['empty_domain.yaml'], 'empty_domain.yaml: config file cannot have empty domain'], // TestEmptyDomain
    [['basic_config.yaml', 'duplicate_domain.yaml'], "duplicate_domain.yaml: duplicate domain 'test-domain' in config file"], // TestDuplicateDomain
    [['empty_key.yaml'], 'empty_key.yaml: descriptor has empty key'], // TestEmptyKey
    [['duplicate_key.yaml'], "duplicate_key.yaml: duplicate descriptor composite key 'test-domain.key1_value1'"], // TestDuplicateKey
    [['bad_limit_unit.yaml'], "bad_limit_unit.yaml: invalid rate limit unit 'foo'"], // TestBadLimitUnit
    [['replaces_self.yaml'], 'replaces_self.yaml: replaces should not contain name of same descriptor'], // TestReplacesSelf
    [['replaces_empty.yaml'], 'replaces_empty.yaml: should not have an empty replaces entry'], // TestReplacesEmpty
    [['bad_yaml.yaml'], 'bad_yaml.yaml: error loading config file: '], // TestBadYaml (upstream then: yaml: line 2: found unexpected end of stream)
    [['misspelled_key.yaml'], "misspelled_key.yaml: config error, unknown key 'ratelimit'"], // TestMisspelledKey
    [['misspelled_key2.yaml'], "misspelled_key2.yaml: config error, unknown key 'requestsperunit'"], // TestMisspelledKey
    [['non_string_key.yaml'], 'non_string_key.yaml: config error, key is not of type string: 0.25'], // TestNonStringKey
    [['non_map_list.yaml'], 'non_map_list.yaml: config error, yaml file contains list of type other than map: a'], // TestNonMapList
    [['unlimited_with_unit.yaml'], 'unlimited_with_unit.yaml: should not specify rate limit unit when unlimited'], // TestUnlimitedWithRateLimitUnit
  ]
  for (const [files, message] of cases)
    assert.throws(
      () => parseFixtures(...files),
      (e: Error) => {
        assert.ok(e instanceof RlsConfigError, `${files.join(' + ')}: ${e.message}`)
        const tail = e.message.slice(message.length)
        assert.ok(
          e.message.startsWith(message) && (message.endsWith(': ') || tail === '' || /^ \(at [^)]+\)$/.test(tail)),
          `${files.join(' + ')}: "${e.message}"`,
        )
        return true
      },
      `${files.join(' + ')}`,
    )
})

test("envoyproxy/ratelimit's valid configurations load, with the limits its config tests read from them", () => {
  const limit = (domain: RlsNode, ...kv: string[]) => {
    const entries = []
    for (let i = 0; i < kv.length; i += 2) entries.push({ key: kv[i]!, value: kv[i + 1]! })
    return matchLimit(domain, entries)
  }
  // TestShadowModeConfig: shadow_mode is per limit, as written.
  const shadow = parseFixtures('shadowmode_config.yaml').get('test-domain')!
  assert.deepEqual(
    [
      limit(shadow, 'key1', 'value1', 'subkey1', 'something'),
      limit(shadow, 'key1', 'value1', 'subkey1', 'subvalue1'),
      limit(shadow, 'key2', 'something'),
      limit(shadow, 'key2', 'value2'),
    ].map((l) => [l?.requestsPerUnit, l?.unit, l?.shadow]),
    [
      [5, 'second', false],
      [10, 'second', true],
      [20, 'minute', true],
      [30, 'minute', false],
    ],
  )
  // TestMetadata: `metadata:` is free-form and does not change the limits.
  const meta = parseFixtures('metadata.yaml').get('test-domain')!
  assert.equal(limit(meta, 'key1', 'value1', 'subkey1', 'something')?.requestsPerUnit, 5)
  assert.equal(limit(meta, 'key2', 'something')?.unit, 'minute')
  // TestBasicConfig: names, units, unlimited, detailed_metric.
  const basic = parseFixtures('basic_config.yaml').get('test-domain')!
  assert.equal(limit(basic, 'key4', 'foo')?.name, 'key4_rate_limit')
  assert.equal(limit(basic, 'key3', 'foo')?.name, undefined)
  assert.equal(limit(basic, 'key6', 'foo')?.unlimited, true)
  assert.equal(limit(basic, 'key7', 'any')?.detailedMetric, true)
  for (const f of ['wildcard.yaml', 'share_threshold.yaml', 'merge_domain_key1.yaml', 'merge_domain_key2.yaml'])
    assert.ok(parseFixtures(f).get('test-domain'), f)
})

test('upstream accepts: its basic config, its other known keys, unlimited with requests_per_unit, requests_per_unit absent as 0', () => {
  assert.ok(parseFixtures('basic_config.yaml').get('test-domain'))
  const c = parseRlsYaml(
    [
      'domain: d',
      'descriptors:',
      '  - key: a',
      '    quota_mode: true',
      '    value_to_metric: true',
      '    metadata: {any: [1, 2], Thing: x}',
      '    rate_limit: {unlimited: true, requests_per_unit: 5}',
      '  - key: b',
      '    rate_limit: {unit: second}',
    ].join('\n'),
    'ok.yaml',
  ).get('d')!
  assert.equal(matchLimit(c, [{ key: 'a', value: '' }])?.unlimited, true)
  assert.equal(matchLimit(c, [{ key: 'b', value: '' }])?.requestsPerUnit, 0)
})

test('MERGE_DOMAIN_CONFIG: one domain over two files merges; off, it is a duplicate domain; a descriptor both define is refused', () => {
  const merged = new Map()
  for (const n of ['merge_domain_key1.yaml', 'merge_domain_key2.yaml'])
    parseRlsYaml(readFileSync(join(UPSTREAM, n), 'utf8'), n, merged, true)
  const d = merged.get('test-domain')!
  assert.equal(matchLimit(d, [{ key: 'key1', value: 'value1' }])?.requestsPerUnit, 10)
  assert.equal(matchLimit(d, [{ key: 'key2', value: 'value2' }])?.requestsPerUnit, 20)
  assert.equal(merged.get('foo_domain'), undefined)
  assert.throws(
    () => parseFixtures('merge_domain_key1.yaml', 'merge_domain_key2.yaml'),
    /merge_domain_key2\.yaml: duplicate domain 'test-domain' in config file/,
  )
  const twice = new Map()
  assert.throws(() => {
    for (const n of ['merge_domain_key1.yaml', 'merge_domain_key1.yaml'])
      parseRlsYaml(readFileSync(join(UPSTREAM, n), 'utf8'), n, twice, true)
  }, /merge_domain_key1\.yaml: .*duplicate descriptor composite key 'test-domain\.key1_value1'/)
})

test('a directory of files loads with or without merging, as MERGE_DOMAIN_CONFIG says', () => {
  const dir = mkdtempSync(join(tmpdir(), 'rls-merge-'))
  try {
    for (const n of ['merge_domain_key1.yaml', 'merge_domain_key2.yaml']) copyFileSync(join(UPSTREAM, n), join(dir, n))
    assert.throws(() => loadRlsConfig(dir), /duplicate domain 'test-domain'/)
    assert.equal(matchLimit(loadRlsConfig(dir, true).get('test-domain')!, [{ key: 'key2', value: 'value2' }])?.requestsPerUnit, 20)
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})

test('FAIRVISOR_RLS_MERGE_DOMAIN_CONFIG, or upstream MERGE_DOMAIN_CONFIG: false by default, ours wins when both are set', () => {
  const base = { FAIRVISOR_MODE: 'decision_service' }
  assert.equal(loadSettings(base).rlsMergeDomainConfig, false)
  assert.equal(loadSettings({ ...base, MERGE_DOMAIN_CONFIG: 'true' }).rlsMergeDomainConfig, true)
  assert.equal(loadSettings({ ...base, FAIRVISOR_RLS_MERGE_DOMAIN_CONFIG: 'true' }).rlsMergeDomainConfig, true)
  assert.equal(
    loadSettings({ ...base, MERGE_DOMAIN_CONFIG: 'true', FAIRVISOR_RLS_MERGE_DOMAIN_CONFIG: 'false' }).rlsMergeDomainConfig,
    false,
  )
  assert.throws(() => loadSettings({ ...base, MERGE_DOMAIN_CONFIG: 'maybe' }), /MERGE_DOMAIN_CONFIG/)
})

test("metadata: kept with the descriptor's limit, as upstream's metadata.yaml reads (its TestMetadata)", () => {
  const d = parseFixtures('metadata.yaml').get('test-domain')
  const at = (entries: Array<[string, string]>) =>
    matchLimit(
      d,
      entries.map(([key, value]) => ({ key, value })),
    )
  const sub = at([
    ['key1', 'value1'],
    ['subkey1', 'something'],
  ])!
  assert.deepEqual([sub.requestsPerUnit, sub.unit, sub.metadata], [5, 'second', { name: 'service_1' }])
  assert.deepEqual(at([['key2', 'something']])!.metadata, { service_with_quota: { name: 'service_2' } })
  // The other limit of key1_value1 has none.
  assert.equal(
    at([
      ['key1', 'value1'],
      ['subkey1', 'subvalue1'],
    ])!.metadata,
    undefined,
  )
})

test('metadata: anything in a mapping; empty or on a descriptor without a limit, nothing; not a mapping, refused', () => {
  const c = parseRlsYaml(
    [
      'domain: m',
      'descriptors:',
      '  - key: a',
      '    metadata: {n: 1, list: [x, {y: true}], nested: {deep: null}}',
      '    rate_limit: {unit: minute, requests_per_unit: 1}',
      '  - key: empty',
      '    metadata: {}',
      '    rate_limit: {unit: minute, requests_per_unit: 1}',
      '  - key: parent',
      '    metadata: {unused: 1}',
      '    descriptors:',
      '      - key: child',
      '        rate_limit: {unit: minute, requests_per_unit: 1}',
    ].join('\n'),
    'm.yaml',
  ).get('m')!
  assert.deepEqual(matchLimit(c, [{ key: 'a', value: 'v' }])!.metadata, { n: 1, list: ['x', { y: true }], nested: { deep: null } })
  assert.equal(matchLimit(c, [{ key: 'empty', value: 'v' }])!.metadata, undefined)
  assert.equal(c.children.get('parent')!.limit, undefined)
  for (const bad of ['[a, b]', 'text'])
    assert.throws(
      () => parseRlsYaml(`domain: m\ndescriptors:\n  - key: a\n    metadata: ${bad}\n`, 'bad.yaml'),
      (e: Error) =>
        e instanceof RlsConfigError && /^bad\.yaml: error parsing metadata: not a mapping \(at m\.descriptors\[0\]\)$/.test(e.message),
      bad,
    )
})

test('a directory: every .yaml / .yml loads, dot files and other files are ignored (upstream with RUNTIME_IGNOREDOTFILES)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'fv-rls-dot-'))
  try {
    writeFileSync(join(dir, 'a.yaml'), 'domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 1}\n')
    writeFileSync(join(dir, 'b.yml'), 'domain: b\n')
    // Broken on purpose: read, they would refuse the whole directory.
    writeFileSync(join(dir, '.a.yaml.swp.yaml'), 'ratelimit: {}\n')
    writeFileSync(join(dir, 'notes.txt'), 'ratelimit: {}\n')
    assert.deepEqual([...loadRlsConfig(dir).keys()].sort(), ['a', 'b'])
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})
