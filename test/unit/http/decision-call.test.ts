/** The request a decision call describes, in each proxy's convention (http/decision-call.ts). */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { AmbiguousRequest } from '../../../src/errors.js'
import { inputFromDecisionCall } from '../../../src/http/decision-call.js'

type Headers = [string, string][]

function read(headers: Headers, method = 'POST', url = '/v1/decision') {
  const i = inputFromDecisionCall({ method, url, rawHeaders: headers.flat(), peer: '10.0.0.1' }, 'reject')
  return { method: i.method, path: i.path, rawQuery: i.rawQuery, host: i.host, refused: i.refused }
}

const ambiguous = (headers: Headers, method = 'GET', url = '/v1/decision') =>
  assert.throws(() => read(headers, method, url), AmbiguousRequest, JSON.stringify(headers))

test('X-Original-*: method, URI (read as a request line) and host; defaults GET, / and the Host of the call', () => {
  assert.deepEqual(
    read([
      ['Host', 'fairvisor'],
      ['X-Original-Method', 'DELETE'],
      ['X-Original-URI', '/api/../items?id=1'],
      ['X-Original-Host', 'shop.example'],
    ]),
    { method: 'DELETE', path: '/items', rawQuery: 'id=1', host: 'shop.example', refused: undefined },
  )
  assert.deepEqual(
    read([
      ['Host', 'fairvisor'],
      ['X-Original-URI', '/a'],
    ]),
    {
      method: 'GET',
      path: '/a',
      rawQuery: '',
      host: 'fairvisor',
      refused: undefined,
    },
  )
  assert.equal(read([['X-Original-URI', 'https://api.example/a']]).host, 'api.example', 'an absolute URI names the host')
})

test('Traefik ForwardAuth: a GET with X-Forwarded-Method/-Uri/-Host; the Host of the call is the gateway', () => {
  assert.deepEqual(
    read(
      [
        ['Host', 'fairvisor:8080'],
        ['X-Forwarded-For', '203.0.113.9'],
        ['X-Forwarded-Method', 'POST'],
        ['X-Forwarded-Proto', 'https'],
        ['X-Forwarded-Host', 'shop.example'],
        ['X-Forwarded-Uri', '/cart//checkout?step=2'],
      ],
      'GET',
    ),
    { method: 'POST', path: '/cart/checkout', rawQuery: 'step=2', host: 'shop.example', refused: undefined },
  )
})

test('Caddy forward_auth: the Host of the call is the client host, X-Forwarded-Host may be left out', () => {
  assert.deepEqual(
    read(
      [
        ['Host', 'shop.example'],
        ['X-Forwarded-Method', 'PUT'],
        ['X-Forwarded-Uri', '/a%2Fb'],
      ],
      'GET',
    ),
    {
      method: 'PUT',
      path: '/a%2Fb',
      rawQuery: '',
      host: 'shop.example',
      refused: 'encoded_slash',
    },
  )
})

test('X-Forwarded-Host or -Proto alone (any proxy sets them) does not make a forward-auth call', () => {
  assert.deepEqual(
    read([
      ['Host', 'fairvisor'],
      ['X-Forwarded-Host', 'evil.example'],
      ['X-Forwarded-Proto', 'https'],
    ]),
    {
      method: 'GET',
      path: '/',
      rawQuery: '',
      host: 'fairvisor',
      refused: undefined,
    },
  )
  const nginx: Headers = [
    ['Host', 'fairvisor'],
    ['X-Original-Method', 'GET'],
    ['X-Original-URI', '/a'],
    ['X-Original-Host', 'api.example'],
    ['X-Forwarded-Host', 'cdn.example'],
  ]
  assert.equal(read(nginx).host, 'api.example', 'a CDN X-Forwarded-Host beside X-Original-*: X-Original-Host')
})

test('both conventions: X-Original-* is read, and the X-Forwarded-* request must be the same one', () => {
  const same: Headers = [
    ['Host', 'fairvisor'],
    ['X-Original-Method', 'GET'],
    ['X-Original-URI', '/api/items?x=1'],
    ['X-Original-Host', 'API.example:443'],
    ['X-Forwarded-Method', 'GET'],
    ['X-Forwarded-Uri', '/api//items?x=1'],
    ['X-Forwarded-Host', 'api.example'],
  ]
  assert.equal(read(same).path, '/api/items')
  // Behind Traefik or Caddy, a client that adds an X-Original-* header of its own.
  const proxy: Headers = [
    ['Host', 'fairvisor'],
    ['X-Forwarded-Method', 'POST'],
    ['X-Forwarded-Uri', '/expensive'],
    ['X-Forwarded-Host', 'api.example'],
  ]
  ambiguous([...proxy, ['X-Original-URI', '/cheap']])
  ambiguous([...proxy, ['X-Original-Host', 'other.example']])
  // Its method defaults to GET when only the URI is sent: the client cannot drop the method either.
  ambiguous([...proxy, ['X-Original-URI', '/expensive'], ['X-Original-Host', 'api.example']])
  assert.equal(
    read([...proxy, ['X-Original-Method', 'POST'], ['X-Original-URI', '/expensive'], ['X-Original-Host', 'api.example']]).method,
    'POST',
  )
  // Behind nginx, a client's own X-Forwarded-Uri or -Method.
  const nginx: Headers = [
    ['Host', 'fairvisor'],
    ['X-Original-Method', 'GET'],
    ['X-Original-URI', '/a'],
    ['X-Original-Host', 'api.example'],
  ]
  ambiguous([...nginx, ['X-Forwarded-Uri', '/b']])
  ambiguous([...nginx, ['X-Forwarded-Method', 'POST']])
})

test('repeated with different values, or a list where one value belongs: refused, as for X-Original-*', () => {
  ambiguous([
    ['X-Forwarded-Uri', '/a'],
    ['X-Forwarded-Uri', '/b'],
  ])
  ambiguous([
    ['X-Forwarded-Method', 'GET'],
    ['X-Forwarded-Method', 'POST'],
    ['X-Forwarded-Uri', '/a'],
  ])
  ambiguous([
    ['X-Forwarded-Uri', '/a'],
    ['X-Forwarded-Host', 'a.example'],
    ['x-forwarded-host', 'b.example'],
  ])
  ambiguous([
    ['X-Forwarded-Uri', '/a'],
    ['X-Forwarded-Host', 'evil.example, api.example'],
  ])
  ambiguous([
    ['X-Forwarded-Uri', '/a'],
    ['X-Forwarded-Method', 'GET, POST'],
  ])
  ambiguous(
    [
      ['X-Original-URI', '/a'],
      ['X-Original-URI', '/b'],
    ],
    'POST',
  )
  assert.equal(
    read([
      ['X-Forwarded-Uri', '/a'],
      ['X-Forwarded-Uri', '/a'],
    ]).path,
    '/a',
    'the same value twice is one value',
  )
  // Only the exact names count: X_Forwarded_Uri is another header.
  assert.equal(
    read([
      ['X_Forwarded_Uri', '/b'],
      ['X-Forwarded-Uri', '/a'],
    ]).path,
    '/a',
  )
})

test("Envoy HTTP ext_authz (path_prefix /v1/decision): the call's method, path after the prefix and Host", () => {
  assert.deepEqual(
    read(
      [
        ['Host', 'shop.example'],
        ['Content-Length', '0'],
      ],
      'PATCH',
      '/v1/decision/cart/./7?x=/y',
    ),
    {
      method: 'PATCH',
      path: '/cart/7',
      rawQuery: 'x=/y',
      host: 'shop.example',
      refused: undefined,
    },
  )
  assert.equal(read([['Host', 'h']], 'GET', '/v1/decision/').path, '/')
  // Envoy sets the method, path and Host itself: description headers from the client are not read.
  assert.equal(
    read(
      [
        ['Host', 'h'],
        ['X-Original-URI', '/cheap'],
        ['X-Forwarded-Uri', '/cheap'],
      ],
      'GET',
      '/v1/decision/exp',
    ).path,
    '/exp',
  )
  ambiguous(
    [
      ['Host', 'a.example'],
      ['Host', 'b.example'],
    ],
    'GET',
    '/v1/decision/x',
  )
})
