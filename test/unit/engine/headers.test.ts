/** docs/behaviour.md §7: every rate-limit header value parses with a strict RFC 9651 parser. */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { parseItem } from 'structured-headers'
import { rateLimitHeaders, sfString, type LimitView } from '../../../src/engine/headers.js'
import { bundle, compile, Harness, policy, rule, tb } from '../../helpers/engine-harness.js'

function headerMap(l: LimitView): Map<string, string> {
  const flat = rateLimitHeaders(l)
  const m = new Map<string, string>()
  for (let i = 0; i < flat.length; i += 2) m.set(flat[i]!, flat[i + 1]!)
  return m
}

/** Parses strictly; returns [bare item, params as an object]. */
function item(v: string): [unknown, Record<string, unknown>] {
  const [value, params] = parseItem(v)
  return [value, Object.fromEntries(params)]
}

const IDS = ['api', 'per user', 'quo"te', 'back\\slash', 'both \\" mixed', 'café', '日本', 'tab\there', '']

for (const id of IDS) {
  test(`RateLimit and RateLimit-Policy parse for policy id ${JSON.stringify(id)}`, () => {
    const h = headerMap({ policyId: id, limit: 10, remaining: 3, resetS: 2, windowS: 5 })
    const [name, params] = item(h.get('RateLimit')!)
    assert.equal(typeof name, 'string')
    assert.deepEqual(params, { r: 3, t: 2 })
    const [pname, pparams] = item(h.get('RateLimit-Policy')!)
    assert.equal(pname, name)
    assert.deepEqual(pparams, { q: 10, w: 5 })
    if (/^[\x20-\x7e]*$/.test(id)) assert.equal(name, id, 'printable ASCII ids round-trip exactly')
    for (const k of ['RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset']) assert.equal(typeof item(h.get(k)!)[0], 'number')
  })
}

test('sfString escapes quotes and backslashes and replaces what RFC 9651 strings cannot hold', () => {
  assert.equal(sfString('a"b\\c'), '"a\\"b\\\\c"')
  assert.equal(sfString('é\n'), '"??"')
})

test('integers stay within RFC 9651 (15 digits, no exponent, no fraction) for extreme bundles', () => {
  const h = headerMap({ policyId: 'p', limit: 1e21, remaining: 1e20, resetS: 1e18, windowS: 2.5e30 })
  for (const [k, v] of h) assert.doesNotThrow(() => parseItem(v), `${k}: ${v}`)
  assert.equal(h.get('RateLimit-Limit'), '999999999999999')
  const frac = headerMap({ policyId: 'p', limit: 2.5, remaining: 1, resetS: 1, windowS: 1 })
  assert.equal(frac.get('RateLimit-Limit'), '2')
})

test('headers the engine produces along a countdown and a reject all parse', () => {
  const h = new Harness(
    compile(bundle([policy('quo"ted\\id', [rule('r', ['ip:address'], tb(0.3, 2.5, { cost_source: 'header:x-cost' }))])])),
  )
  const seen: string[] = []
  for (let i = 0; i < 6; i++) {
    const d = h.run({ headers: { 'x-cost': '0.7' } }, i * 0.1)
    assert.ok(d.limit)
    for (const [k, v] of headerMap(d.limit)) {
      assert.doesNotThrow(() => parseItem(v), `${k}: ${v}`)
      seen.push(v)
    }
    if (!d.allowed) break
  }
  assert.ok(
    seen.some((v) => v.startsWith('"quo\\"ted\\\\id";r=0')),
    'reached the reject',
  )
})
