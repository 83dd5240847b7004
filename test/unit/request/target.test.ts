/** Request targets read the same way in every mode (request/target.ts, docs/behaviour.md §2). */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { forwardTarget, readTarget, targetAuthority } from '../../../src/request/target.js'
import { bundle, compile, Harness, policy, rule, tb } from '../../helpers/engine-harness.js'

const read = (t: string, host = 'api.example.com', slashes: 'reject' | 'decode' | 'keep' = 'reject') => readTarget(t, host, slashes)

test('a fragment is dropped before the query is split; the query is kept as received', () => {
  assert.deepEqual(read('/api/expensive#x'), { path: '/api/expensive', alsoPaths: undefined, rawQuery: '', refused: undefined })
  assert.deepEqual(read('/a?b=1&c=%2F#frag?x'), { path: '/a', alsoPaths: undefined, rawQuery: 'b=1&c=%2F', refused: undefined })
  assert.equal(read('/a#b?c').rawQuery, '')
  assert.equal(read('/a?\\..//').rawQuery, '\\..//', 'nothing after ? is read as a path')
})

test('absolute form: the authority must be the Host (case, port and a trailing dot aside)', () => {
  assert.equal(read('http://api.example.com/x').refused, undefined)
  assert.equal(read('http://API.Example.com:8080/x', 'api.example.com.').refused, undefined)
  assert.equal(read('http://api.example.com/x').path, '/x')
  assert.equal(read('http://admin.example.com/h', 'other').refused, 'host_mismatch')
  assert.equal(read('http://user@api.example.com/x').refused, 'host_mismatch')
  assert.deepEqual(read('https://api.example.com?q=1'), { path: '/', alsoPaths: undefined, rawQuery: 'q=1', refused: undefined })
  assert.equal(targetAuthority('http://a.example:81/x'), 'a.example:81')
  assert.equal(targetAuthority('/x'), undefined)
})

test('escaped slashes: reject refuses, decode separates, keep leaves them in the segment', () => {
  for (const t of ['/api%2Fexpensive', '/x/..%2fapi/expensive', '/api%5Cexpensive', '/a/%5c/b'])
    assert.equal(read(t).refused, 'encoded_slash', t)
  assert.equal(read('/api%2Fexpensive', 'h', 'decode').path, '/api/expensive')
  assert.equal(read('/x/..%2fapi/expensive', 'h', 'decode').path, '/api/expensive')
  assert.equal(read('/api%5Cexpensive', 'h', 'decode').path, '/api/expensive')
  assert.equal(read('/x/..%2fapi/expensive', 'h', 'keep').path, '/x/..%2Fapi/expensive')
  assert.equal(read('/api%2Fexpensive', 'h', 'keep').refused, undefined)
  assert.equal(read('/a?next=%2Fb').refused, undefined, 'an escaped slash in the query is data')
})

test('backslashes, slash runs, dot segments, escaped unreserved characters: one path', () => {
  for (const t of [
    '/api\\expensive',
    '/api//expensive',
    '/x/../api/expensive',
    '/x/%2e%2e/api/./expensive',
    '/%61pi/expensive',
    '/api\\.\\expensive',
  ])
    assert.equal(read(t).path, '/api/expensive', t)
  assert.equal(read('*').path, '*')
  assert.equal(read('api/x').path, '/api/x', 'a relative target is read against /, as WHATWG URL resolves it')
})

test('other readings: ; parameters stripped, and a leading // read as WHATWG URL reads it', () => {
  assert.deepEqual(read('/api/expensive;x=1').alsoPaths, ['/api/expensive'])
  assert.equal(read('/api/expensive;x=1').path, '/api/expensive;x=1', 'the parameters are kept in the path forwarded')
  assert.deepEqual(read('/x/..;/api/expensive').alsoPaths, ['/api/expensive'])
  assert.deepEqual(read('//h/api/expensive'), { path: '/h/api/expensive', alsoPaths: ['/api/expensive'], rawQuery: '', refused: undefined })
  assert.deepEqual(read('/\\h/api/expensive').alsoPaths, ['/api/expensive'])
  assert.deepEqual(read('///h').alsoPaths, ['/'])
  assert.equal(read('/api/expensive').alsoPaths, undefined)
})

test('forwardTarget: the request line itself when nothing changed, else the normalised path or the original in origin form', () => {
  const url = '/api/orders?page=2'
  assert.equal(forwardTarget(url, read(url), 'normalised'), url)
  const t = '/x/../api//orders;v=1?page=2#top'
  assert.equal(forwardTarget(t, read(t), 'normalised'), '/api/orders;v=1?page=2')
  assert.equal(forwardTarget(t, read(t), 'original'), '/x/../api//orders;v=1?page=2')
  const abs = 'http://api.example.com/a/./b?q'
  assert.equal(forwardTarget(abs, read(abs), 'normalised'), '/a/b?q')
  assert.equal(forwardTarget(abs, read(abs), 'original'), '/a/./b?q')
  assert.equal(forwardTarget('http://api.example.com', read('http://api.example.com'), 'original'), '/')
  assert.equal(forwardTarget('*', read('*'), 'normalised'), '*')
})

test('a refused target is a 400 with its reason before any policy, in shadow too', () => {
  const b = compile(bundle([policy('p', [rule('r', [], tb(1, 100))], { mode: 'shadow' }, { pathPrefix: '/' })]))
  const d = new Harness(b).run({ path: '/api%2Fexpensive' })
  assert.deepEqual([d.allowed, d.status, d.reason], [false, 400, 'encoded_slash'])
  const h = new Harness(b).run({ path: 'http://admin.example.com/h', host: 'other' })
  assert.deepEqual([h.allowed, h.status, h.reason], [false, 400, 'host_mismatch'])
  assert.equal(new Harness(b).run({ path: '/api%2Fexpensive', slashes: 'keep' }).status, 200)
})

test('a request is counted by every policy one of its readings meets', () => {
  const b = compile(
    bundle([
      policy('api', [rule('a', [], tb(1, 1))], {}, { pathPrefix: '/api/' }),
      policy('x', [rule('x', [], tb(1, 1))], {}, { pathPrefix: '/x/' }),
    ]),
  )
  assert.deepEqual(new Harness(b).run({ path: '/x/..;/api/e' }).matchedPolicies, ['api', 'x'])
  assert.deepEqual(new Harness(b).run({ path: '//x/api/e' }).matchedPolicies, ['api', 'x'])
})

test('kill-switch routes compare as a default pathExact: any case, trailing slash, every reading', () => {
  const doc = {
    ...bundle([policy('p', [rule('r', [], tb(1, 100))], {}, { pathPrefix: '/' })]),
    kill_switches: [{ scope_key: 'header:x-tenant', scope_value: 't1', route: '/api/expensive' }],
  }
  const b = compile(doc)
  for (const path of ['/api/expensive', '/API/Expensive/', '/api/expensive;x=1', '//h/api/expensive', '/api\\expensive']) {
    const d = new Harness(b).run({ path, headers: { 'x-tenant': 't1' } })
    assert.equal(d.reason, 'kill_switch', path)
  }
  assert.equal(new Harness(b).run({ path: '/api/other', headers: { 'x-tenant': 't1' } }).reason, 'all_rules_passed')
})
