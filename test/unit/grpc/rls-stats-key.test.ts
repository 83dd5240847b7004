/**
 * Statistics keys as envoyproxy/ratelimit builds them, from its own tests
 * (test/config/config_test.go: TestWildcardConfig, TestDetailedMetric, the
 * TestValueToMetric_* cases, TestShareThreshold) on its own YAML files where
 * it has them: the key of the limit a descriptor matches, fixed per limit
 * when no request changes it.
 */
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, test } from 'node:test'
import { compileRls } from '../../../src/grpc/rls-compile.js'
import { parseRlsYaml, type RlsConfig } from '../../../src/grpc/rls-config.js'
import { matchLimit, type Entry } from '../../../src/grpc/rls-match.js'
import { detailedKey, keyLabels, limitKeys, overrideKey, requestKey, sanitize } from '../../../src/grpc/rls-stats-key.js'
import { ROOT } from '../../helpers/processes.js'

const upstream = (file: string): RlsConfig => parseRlsYaml(readFileSync(join(ROOT, 'test/fixtures/rls/upstream', file), 'utf8'), file)

/** The key the descriptor `entries` of `domain` counts under, and whether it was fixed for its limit. */
function keyOf(config: RlsConfig, domain: string, pairs: Array<[string, string]>): { key: string; fixed: boolean } {
  const entries: Entry[] = pairs.map(([key, value]) => ({ key, value }))
  const d = compileRls(config).get(domain)!
  const limit = matchLimit(d.root, entries)
  assert.ok(limit, `no limit for ${JSON.stringify(pairs)}`)
  const k = limitKeys(domain, d).get(d.rules.get(limit)!)!
  const built = requestKey(domain, d.root, entries, k.detailed)
  // A fixed key is what the walk builds for any request that reaches the limit; so is the walk-free detailed key.
  if (k.fixed !== undefined) assert.equal(k.fixed, sanitize(built))
  if (k.detailed && !k.shared) assert.equal(detailedKey(domain, entries), built)
  return { key: k.fixed ?? built, fixed: k.fixed !== undefined }
}

describe('statistics keys (envoyproxy/ratelimit config_test.go)', () => {
  test('wildcard.yaml: a key-only descriptor by its key, a wildcard by its pattern (TestWildcardConfig)', () => {
    const c = upstream('wildcard.yaml')
    assert.deepEqual(keyOf(c, 'test-domain', [['noVal', 'foo1']]), { key: 'test-domain.noVal', fixed: true })
    assert.equal(keyOf(c, 'test-domain', [['noVal', 'foo2']]).key, 'test-domain.noVal')
    assert.equal(keyOf(c, 'test-domain', [['noWild', 'foo']]).key, 'test-domain.noWild_foo')
    assert.equal(keyOf(c, 'test-domain', [['wild', 'foo1']]).key, 'test-domain.wild_foo*')
    assert.equal(keyOf(c, 'test-domain', [['wild', 'foo2']]).key, 'test-domain.wild_foo*')
    assert.equal(
      keyOf(c, 'test-domain', [
        ['nestedWild', 'val1'],
        ['wild', 'goo2'],
      ]).key,
      'test-domain.nestedWild_val1.wild_goo*',
    )
    assert.equal(keyOf(c, 'test-domain', [['midWild', 'barab']]).key, 'test-domain.midWild_bar*b')
    assert.equal(keyOf(c, 'test-domain', [['multiWild', 'foo1bar2baz']]).key, 'test-domain.multiWild_foo*bar*baz')
  })

  test('detailed_metric: every entry with its value (TestDetailedMetric)', () => {
    const nested = parseRlsYaml(
      `domain: nested
descriptors:
  - key: key-1
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 100}
    descriptors:
      - key: key-2
        detailed_metric: true
        rate_limit: {unit: minute, requests_per_unit: 5}
  - key: plain
    rate_limit: {unit: minute, requests_per_unit: 100}
    descriptors:
      - key: key-2
        rate_limit: {unit: minute, requests_per_unit: 5}
`,
      'inline',
    )
    assert.deepEqual(keyOf(nested, 'nested', [['key-1', 'value-1']]), { key: 'nested.key-1_value-1', fixed: false })
    assert.equal(
      keyOf(nested, 'nested', [
        ['key-1', 'value-1'],
        ['key-2', 'value-2'],
      ]).key,
      'nested.key-1_value-1.key-2_value-2',
    )
    assert.equal(keyOf(nested, 'nested', [['plain', 'value-1']]).key, 'nested.plain')
    assert.equal(
      keyOf(nested, 'nested', [
        ['plain', 'value-1'],
        ['key-2', 'value-2'],
      ]).key,
      'nested.plain.key-2',
    )
    const realistic = parseRlsYaml(
      `domain: nested
descriptors:
  - key: key_1
    rate_limit: {requests_per_unit: 500, unit: minute}
    detailed_metric: true
  - key: key_1
    value: some-value-for-key-1
    rate_limit: {requests_per_unit: 500, unit: minute}
  - key: key_2
    rate_limit: {requests_per_unit: 5000, unit: minute}
    detailed_metric: true
    descriptors:
      - key: key_3
        detailed_metric: true
      - key: key_3
        value: requested-key3-value
        rate_limit: {requests_per_unit: 5, unit: minute}
        detailed_metric: true
`,
      'inline',
    )
    assert.equal(keyOf(realistic, 'nested', [['key_1', 'value-for-key-1']]).key, 'nested.key_1_value-for-key-1')
    assert.equal(keyOf(realistic, 'nested', [['key_2', 'key-2-value']]).key, 'nested.key_2_key-2-value')
    assert.equal(
      keyOf(realistic, 'nested', [
        ['key_2', 'key-2-value'],
        ['key_3', 'requested-key3-value'],
      ]).key,
      'nested.key_2_key-2-value.key_3_requested-key3-value',
    )
  })

  test('value_to_metric: the request value names the levels that ask for it (TestValueToMetric_*)', () => {
    const c = parseRlsYaml(
      `domain: domain
descriptors:
  - key: route
    value_to_metric: true
    descriptors:
      - key: http_method
        value_to_metric: true
        descriptors:
          - key: subject_id
            rate_limit: {requests_per_unit: 60, unit: minute}
  - key: k1
    descriptors:
      - key: k2
        value_to_metric: true
        descriptors:
          - key: k3
            rate_limit: {requests_per_unit: 1, unit: second}
  - key: user
    value_to_metric: true
    descriptors:
      - key: action
        value: read*
        value_to_metric: true
        descriptors:
          - key: resource
            rate_limit: {requests_per_unit: 100, unit: minute}
  - key: api
    value_to_metric: true
    descriptors:
      - key: method
        value: GET
        value_to_metric: true
        descriptors:
          - key: subject_id
            rate_limit: {requests_per_unit: 60, unit: minute}
  - key: detailed
    value_to_metric: true
    descriptors:
      - key: subject_id
        detailed_metric: true
        rate_limit: {requests_per_unit: 60, unit: minute}
`,
      'inline',
    )
    const k = (...pairs: Array<[string, string]>) => keyOf(c, 'domain', pairs).key
    assert.equal(k(['route', 'draw'], ['http_method', 'GET'], ['subject_id', '123']), 'domain.route_draw.http_method_GET.subject_id')
    assert.equal(k(['k1', 'X'], ['k2', 'Y'], ['k3', 'Z']), 'domain.k1.k2_Y.k3')
    assert.equal(k(['user', 'alice'], ['action', 'readfile'], ['resource', 'documents']), 'domain.user_alice.action_readfile.resource')
    assert.equal(k(['api', 'v1'], ['method', 'GET'], ['subject_id', 'u1']), 'domain.api_v1.method_GET.subject_id')
    // An empty value adds no `_`.
    assert.equal(k(['route', ''], ['http_method', 'GET'], ['subject_id', '123']), 'domain.route.http_method_GET.subject_id')
    assert.equal(k(['route', ''], ['http_method', ''], ['subject_id', '123']), 'domain.route.http_method.subject_id')
    // detailed_metric on the limit wins over value_to_metric.
    assert.equal(k(['detailed', 'draw'], ['subject_id', '123']), 'domain.detailed_draw.subject_id_123')
  })

  test('share_threshold.yaml: a shared wildcard keeps its pattern, over value_to_metric and detailed_metric (TestShareThreshold)', () => {
    const c = upstream('share_threshold.yaml')
    const k = (...pairs: Array<[string, string]>) => keyOf(c, 'test-domain', pairs).key
    for (const v of ['files/a.pdf', 'files/b.csv']) assert.equal(k(['files', v]), 'test-domain.files_files/*')
    assert.equal(k(['route', 'api/v1'], ['method', 'GET']), 'test-domain.route_api/*.method')
    assert.equal(k(['service', 'svc/user'], ['endpoint', 'get']), 'test-domain.service_svc/*.endpoint_get')
    assert.equal(k(['nested', 'parent'], ['files', 'nested/file1.txt']), 'test-domain.nested_parent.files_nested/*')
    assert.equal(k(['files', 'top/file1.txt'], ['files', 'nested/file1.txt']), 'test-domain.files_top/*.files_nested/*')
    assert.equal(k(['path', 'path/foo'], ['file', 'file/doc1'], ['type', 'pdf']), 'test-domain.path_path/*.file_file/*.type')
    assert.equal(k(['user', 'user/alice'], ['resource', 'res/file1'], ['action', 'read']), 'test-domain.user_user/*.resource_res/*.action')
    assert.equal(k(['file', 'test1']), 'test-domain.file_test1')
    for (const v of ['test2', 'test23', 'test123']) assert.equal(k(['file', v]), 'test-domain.file_test*')
    for (const v of ['/api/v1', '/api-beta-v1']) assert.equal(k(['midpath', v]), 'test-domain.midpath_/api*v1')
  })

  test("a request's own limit: every entry with its value (descriptorKey)", () => {
    assert.equal(
      overrideKey('test-domain', [
        { key: 'key1', value: 'value1' },
        { key: 'subkey1', value: 'something' },
      ]),
      'test-domain.key1_value1.subkey1_something',
    )
    assert.equal(overrideKey('d', [{ key: 'k', value: '' }]), 'd.k')
  })
})

describe('names and labels', () => {
  test('sanitized as upstream: `:` and `|` to `_`, the dots of an IPv4 address too', () => {
    assert.equal(sanitize('d.remote_address_10.0.0.1'), 'd.remote_address_10_0_0_1')
    assert.equal(sanitize('d.k_a:b|c'), 'd.k_a_b_c')
    assert.equal(sanitize('d.k_1.2.3'), 'd.k_1.2.3', 'not an address')
  })

  test('labels as its statsd-exporter mapping reads them: domain and key1, key2 from a third level on', () => {
    assert.deepEqual(keyLabels('d.k_v'), { domain: 'd', key1: 'k_v' })
    assert.deepEqual(keyLabels('d.k_v.k2'), { domain: 'd', key1: 'k_v', key2: 'k2' })
    assert.deepEqual(keyLabels('d.a.b.c'), { domain: 'd', key1: 'a', key2: 'b' })
  })
})
