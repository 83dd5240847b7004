/**
 * Wildcard values as envoyproxy/ratelimit matches them: `*` anywhere in the
 * value and any number of times, matching zero or more characters; an exact
 * value first; `share_threshold` reporting the pattern an entry counts under.
 * Cases ported from its config tests, on its own wildcard.yaml and share_threshold.yaml.
 */
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import { parseRlsYaml, RlsConfigError } from '../../../src/grpc/rls-config.js'
import { matchLimit, wildcardMatch } from '../../../src/grpc/rls-match.js'
import { ROOT } from '../../helpers/processes.js'

const load = (name: string) => parseRlsYaml(readFileSync(join(ROOT, 'test/fixtures/rls/upstream', name), 'utf8'), name).get('test-domain')!
const wild = load('wildcard.yaml')
const shared = load('share_threshold.yaml')
const entries = (kv: string[]) => {
  const out = []
  for (let i = 0; i < kv.length; i += 2) out.push({ key: kv[i]!, value: kv[i + 1]! })
  return out
}
const limit = (...kv: string[]) => matchLimit(wild, entries(kv))
/** The limit's requests_per_unit and the share patterns, for `kv` in share_threshold.yaml. */
function share(...kv: string[]): [number | undefined, Array<string | undefined>] {
  const patterns: Array<string | undefined> = []
  const rpu = matchLimit(shared, entries(kv), patterns)?.requestsPerUnit
  return [rpu, Array.from(patterns)]
}

test('a trailing wildcard matches every value with its prefix, the same limit for all; others do not', () => {
  assert.ok(limit('wild', 'foo1'))
  assert.equal(limit('wild', 'foo1'), limit('wild', 'foo2'))
  assert.ok(limit('nestedWild', 'val1', 'wild', 'goo2'))
  assert.equal(limit('wild', 'bar'), undefined)
  assert.equal(limit('noWild', 'foo1'), undefined, 'a value without * matches only itself')
  assert.equal(limit('noVal', 'foo1'), limit('noVal', 'foo2'))
})

test('a wildcard in the middle needs the prefix and the suffix, and matches an empty middle', () => {
  assert.ok(limit('midWild', 'barab'))
  assert.equal(limit('midWild', 'barab'), limit('midWild', 'bar123b'))
  assert.ok(limit('midWild', 'barb'))
  assert.equal(limit('midWild', 'bara'), undefined)
  assert.equal(limit('midWild', 'xbarb'), undefined)
})

test('several wildcards need every literal part, in order', () => {
  assert.equal(limit('multiWild', 'foo123bar456baz')?.requestsPerUnit, 10)
  assert.equal(limit('multiWild', 'foobarbaz'), limit('multiWild', 'foo123bar456baz'))
  assert.equal(limit('multiWild', 'foo123baz'), undefined)
  assert.equal(limit('multiWild', 'bar456baz'), undefined)
  assert.equal(limit('multiWild', 'foobazbar'), undefined)
})

test('wildcardMatch: parts may not overlap the prefix or suffix', () => {
  assert.equal(wildcardMatch(['ab', 'ab'], 'ab'), false)
  assert.equal(wildcardMatch(['a', 'b', 'c'], 'abc'), true)
  assert.equal(wildcardMatch(['a', 'b', 'c'], 'ac'), false)
  assert.equal(wildcardMatch(['a', 'bc', 'c'], 'abc'), false)
  assert.equal(wildcardMatch(['/api/', '/action'], '/api/v1/users/action'), true)
  assert.equal(wildcardMatch(['x'], 'x'), true)
})

test('share_threshold: the entry matched by the wildcard counts under the pattern', () => {
  for (const v of ['files/a.txt', 'files/b.txt', 'files/sub/c.txt']) assert.deepEqual(share('files', v), [100, ['files/*']])
  assert.deepEqual(share('route', 'api/v1', 'method', 'GET'), [60, ['api/*']])
  assert.deepEqual(share('service', 'svc/a', 'endpoint', 'e'), [80, ['svc/*']])
  assert.deepEqual(share('midpath', '/api/foo/v1'), [100, ['/api*v1']])
  assert.deepEqual(share('multiroute', 'svcAepBrpc'), [50, ['svc*ep*rpc']])
  assert.deepEqual(share('midroute', '/api-beta-v2'), [80, ['/api*v2']])
  assert.equal(share('midpath', '/api/v2')[0], undefined)
  assert.equal(share('multiroute', 'svcABCrpc')[0], undefined)
})

test('share_threshold nested: per entry index, only the levels that have it', () => {
  assert.deepEqual(share('nested', 'parent', 'files', 'nested/x'), [200, [undefined, 'nested/*']])
  assert.deepEqual(share('files', 'top/a', 'files', 'nested/b'), [300, ['top/*', 'nested/*']])
  assert.deepEqual(share('path', 'path/a', 'file', 'file/b', 'type', 't'), [120, ['path/*']])
  assert.deepEqual(share('user', 'user/1', 'resource', 'res/2', 'action', 'read'), [150, ['user/*', 'res/*']])
  assert.deepEqual(share('tenant', 'tAprod', 'resource', 'resXv2'), [60, ['t*prod', 'res*v2']])
})

test('an exact value wins over a share_threshold wildcard and counts alone', () => {
  assert.deepEqual(share('file', 'test1'), [50, []])
  for (const v of ['test2', 'test123', 'testABC']) assert.deepEqual(share('file', v), [100, ['test*']])
})

test('share_threshold on a value without * is refused', () => {
  assert.throws(
    () => parseRlsYaml('domain: d\ndescriptors:\n  - key: k\n    value: v\n    share_threshold: true\n', 'f.yaml'),
    (e: Error) =>
      e instanceof RlsConfigError &&
      /share_threshold can only be used with wildcard values \(containing '\*'\), but found key 'k_v'/.test(e.message),
  )
})
