/** Selector semantics (docs/behaviour.md §2) through the compiled route index. */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { bundle, compile, policy, rule, tb, view } from '../../helpers/engine-harness.js'
import { hostProblem, normaliseSelectorHost } from '../../../src/bundle/hosts.js'
import { normaliseHost } from '../../../src/request/normalise.js'

function ids(selector: object, method: string, path: string, host = 'localhost'): boolean {
  const b = compile(bundle([policy('p', [rule('r', [], tb(1, 1))], {}, selector)]))
  return b.index.match(method, path, normaliseHost(host)).length === 1
}

const PREFIX: [string, string, boolean][] = [
  ['/v1/', '/v1/x', true],
  ['/v1/', '/v1/x/y', true],
  ['/v1/', '/v1', false],
  ['/v1/', '/v1/', false],
  ['/v1', '/v1/x', true],
  ['/v1', '/v1', false],
  ['/v1', '/v1/', false],
  ['/api', '/apiv2', false],
  ['/api', '/apiv2/x', false],
  ['/api', '/api/v2', true],
  ['/a/b', '/a/b/c', true],
  ['/a/b', '/a/bc/d', false],
  ['/a/b', '/a/x/c', false],
  ['/', '/', true],
  ['/', '/anything', true],
  ['/', '/a/b/c/', true],
  ['/v1/', '/V1/x', true],
  ['/V1/', '/v1/x', true],
]

for (const [prefix, path, want] of PREFIX) {
  test(`pathPrefix ${prefix} ${want ? 'matches' : 'does not match'} ${path}`, () => {
    assert.equal(ids({ pathPrefix: prefix }, 'GET', path), want)
  })
}

test('pathCaseSensitive: true compares a prefix as written', () => {
  assert.equal(ids({ pathPrefix: '/v1/', pathCaseSensitive: true }, 'GET', '/V1/x'), false)
  assert.equal(ids({ pathPrefix: '/v1/', pathCaseSensitive: true }, 'GET', '/v1/x'), true)
  assert.equal(ids({ pathPrefix: '/V1/', pathCaseSensitive: true }, 'GET', '/V1/x'), true)
})

test('pathExact matches the path in any case, with or without a trailing slash (the query is never part of it)', () => {
  assert.equal(ids({ pathExact: '/login' }, 'POST', '/login'), true)
  assert.equal(ids({ pathExact: '/login' }, 'POST', '/login/'), true)
  assert.equal(ids({ pathExact: '/login/' }, 'POST', '/login'), true)
  assert.equal(ids({ pathExact: '/login' }, 'POST', '/Login'), true)
  assert.equal(ids({ pathExact: '/LOGIN' }, 'POST', '/login'), true)
  assert.equal(ids({ pathExact: '/login' }, 'POST', '/login/x'), false)
  assert.equal(ids({ pathExact: '/' }, 'POST', '/'), true)
  assert.equal(ids({ pathExact: '/' }, 'POST', '/x'), false)
  // The engine is handed the path without the query: a request to /login?next=/ is path /login.
  const b = compile(bundle([policy('p', [rule('r', [], tb(1, 1))], {}, { pathExact: '/login' })]))
  assert.equal(b.index.match('GET', view({ path: '/login', query: 'next=/' }).path, 'localhost').length, 1)
})

test('pathExact with pathCaseSensitive / pathTrailingSlashSensitive is string equality in that respect', () => {
  const cs = { pathExact: '/login', pathCaseSensitive: true }
  assert.equal(ids(cs, 'POST', '/Login'), false)
  assert.equal(ids(cs, 'POST', '/login/'), true)
  const ts = { pathExact: '/login', pathTrailingSlashSensitive: true }
  assert.equal(ids(ts, 'POST', '/login/'), false)
  assert.equal(ids(ts, 'POST', '/LOGIN'), true)
  const both = { pathExact: '/login', pathCaseSensitive: true, pathTrailingSlashSensitive: true }
  assert.equal(ids(both, 'POST', '/login'), true)
  assert.equal(ids(both, 'POST', '/login/'), false)
  assert.equal(ids(both, 'POST', '/Login'), false)
})

test('policies with different options in one bundle each compare their own way', () => {
  const b = compile(
    bundle([
      policy('a', [rule('ra', [], tb(1, 1))], {}, { pathExact: '/x' }),
      policy('b', [rule('rb', [], tb(1, 1))], {}, { pathExact: '/x', pathCaseSensitive: true, pathTrailingSlashSensitive: true }),
      policy('c', [rule('rc', [], tb(1, 1))], {}, { pathPrefix: '/x/', pathCaseSensitive: true }),
    ]),
  )
  const got = (p: string): string[] => b.index.match('GET', p, 'localhost').map((x) => x.id)
  assert.deepEqual(got('/x'), ['a', 'b'])
  assert.deepEqual(got('/X/'), ['a'])
  assert.deepEqual(got('/x/y'), ['c'])
  assert.deepEqual(got('/X/y'), [])
})

test('pathExact and pathPrefix together match when either matches; neither never matches', () => {
  const both = { pathExact: '/health', pathPrefix: '/api/' }
  assert.equal(ids(both, 'GET', '/health'), true)
  assert.equal(ids(both, 'GET', '/api/x'), true)
  assert.equal(ids(both, 'GET', '/other'), false)
  assert.equal(ids({ methods: ['GET'] }, 'GET', '/'), false)
})

test('methods are case-sensitive; absent means all', () => {
  assert.equal(ids({ pathPrefix: '/', methods: ['GET', 'POST'] }, 'POST', '/x'), true)
  assert.equal(ids({ pathPrefix: '/', methods: ['GET', 'POST'] }, 'DELETE', '/x'), false)
  assert.equal(ids({ pathPrefix: '/', methods: ['GET'] }, 'get', '/x'), false)
  assert.equal(ids({ pathPrefix: '/' }, 'PATCH', '/x'), true)
})

const HOSTS: [string, string, boolean][] = [
  ['api.example.com', 'api.example.com', true],
  ['api.example.com', 'API.Example.COM', true],
  ['api.example.com', 'api.example.com:8443', true],
  ['api.example.com', 'api.example.com.', true],
  ['api.example.com', 'api.example.com.:80', true],
  ['API.example.com.', 'api.example.com', true],
  ['api.example.com:8080', 'api.example.com:9090', true],
  [' api.example.com ', 'api.example.com', true],
  ['api.example.com', 'www.example.com', false],
  ['example.com', 'api.example.com', false],
  ['api.example.com', 'api.example.com.evil', false],
]

for (const [sel, reqHost, want] of HOSTS) {
  test(`host selector ${JSON.stringify(sel)} ${want ? 'matches' : 'does not match'} Host ${JSON.stringify(reqHost)}`, () => {
    assert.equal(ids({ pathPrefix: '/', hosts: [sel] }, 'GET', '/x', reqHost), want)
  })
}

test('a host-scoped policy does not hide a host-less one in the same bundle', () => {
  const b = compile(
    bundle([
      policy('any', [rule('r1', [], tb(1, 1))]),
      policy('scoped', [rule('r2', [], tb(1, 1))], {}, { pathPrefix: '/', hosts: ['a.example'] }),
    ]),
  )
  assert.deepEqual(
    b.index.match('GET', '/x', 'a.example').map((p) => p.id),
    ['any', 'scoped'],
  )
  assert.deepEqual(
    b.index.match('GET', '/x', 'b.example').map((p) => p.id),
    ['any'],
  )
})

test('host normalisation, both sides', () => {
  assert.equal(normaliseSelectorHost(' Example.COM.:443 '), 'example.com')
  assert.equal(normaliseHost('Example.COM.:443'), 'example.com')
  assert.equal(normaliseHost('[::1]:8080'), '[::1]')
  assert.equal(hostProblem('Example.com:8080'), undefined)
  assert.equal(hostProblem('example.com.'), undefined)
  assert.equal(hostProblem('user@example.com'), 'host "user@example.com" must not contain /, ?, # or @')
  assert.equal(hostProblem('exa_mple.com'), 'host "exa_mple.com" may only contain letters, digits, "." and "-"')
})

const WALKAROUNDS: [string, boolean][] = [
  ['/admin/x', true],
  ['/public/../admin/x', true],
  ['//admin/x', true],
  ['/admin//x', true],
  ['/./admin/x', true],
  ['/%61dmin/x', true],
  ['/%61%64min/x', true],
  ['http://backend/admin/x', true],
  ['/admin%2Fx', false],
  ['/admin/x/..', false],
  ['/adminx/..', false],
]

for (const [raw, want] of WALKAROUNDS) {
  test(`a raw path ${raw} ${want ? 'is' : 'is not'} under pathPrefix /admin/ once normalised`, () => {
    const b = compile(bundle([policy('p', [rule('r', [], tb(1, 1))], {}, { pathPrefix: '/admin/' })]))
    assert.equal(b.index.match('GET', view({ path: raw }).path, 'localhost').length === 1, want)
  })
}

test('pathExact and kill-switch routes see the normalised path too', () => {
  const b = compile(bundle([policy('p', [rule('r', [], tb(1, 1))], {}, { pathExact: '/login' })]))
  assert.equal(b.index.match('POST', view({ path: '/x/../login' }).path, 'localhost').length, 1)
  assert.equal(b.index.match('POST', view({ path: '//login' }).path, 'localhost').length, 1)
})
