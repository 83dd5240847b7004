/** envoyproxy/ratelimit YAML: what loads, what is refused, and which limit a descriptor gets. */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { parseRlsYaml, RlsConfigError } from '../../../src/grpc/rls-config.js'
import { matchLimit } from '../../../src/grpc/rls-match.js'

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
      /d\.descriptors\[0\]\.rate_limit\.unit "fortnight"/,
    ],
    ['domain: d\ndescriptors:\n  - value: v\n', /descriptors\[0\] needs a non-empty key/],
    ['domain: d\ndescriptors:\n  - key: k\n  - key: k\n', /duplicate descriptor k/],
    ['domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true, unit: second}\n', /unlimited takes no unit/],
    [
      'domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: -1}\n',
      /requests_per_unit must be an integer/,
    ],
    ['descriptors: []\n', /needs a non-empty domain/],
    ['domain: d\n---\ndomain: d\n', /duplicate domain d/],
    ['domain: [unclosed\n', /f\.yaml: /],
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
