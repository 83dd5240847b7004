/** The request as the engine sees it (docs/behaviour.md §3): client address, headers, query, JWT claims. */
import assert from 'node:assert/strict'
import { BlockList } from 'node:net'
import { test } from 'node:test'
import { parseTrustedProxies } from '../../../src/settings.js'
import { clientIp } from '../../../src/request/client-ip.js'
import { claimString, decodeBearer } from '../../../src/request/jwt.js'
import { compileDescriptor } from '../../../src/request/descriptors.js'
import { readTarget } from '../../../src/request/target.js'
import { headerKey } from '../../../src/request/raw-headers.js'
import { AmbiguousRequest } from '../../../src/errors.js'
import { b64url, bearer, view } from '../../helpers/engine-harness.js'

const TRUSTED = parseTrustedProxies('10.0.0.0/8, 192.168.1.1, fd00::/8')

const XFF: [string, string, string | string[] | undefined, string][] = [
  ['untrusted peer: X-Forwarded-For ignored', '203.0.113.9', '1.2.3.4', '203.0.113.9'],
  ['trusted peer, no header: the peer', '10.0.0.5', undefined, '10.0.0.5'],
  ['trusted peer: the right-most hop', '10.0.0.5', '1.2.3.4', '1.2.3.4'],
  ['right-most untrusted hop, skipping trusted ones', '10.0.0.5', '6.6.6.6, 1.2.3.4, 10.1.1.1, 192.168.1.1', '1.2.3.4'],
  ['a forged left part never wins', '10.0.0.5', '9.9.9.9, 1.2.3.4', '1.2.3.4'],
  ['garbage right-most entry: the last trusted address', '10.0.0.5', '1.2.3.4, not-an-ip', '10.0.0.5'],
  ['garbage behind a trusted hop: that trusted hop', '10.0.0.5', '1.2.3.4, bogus, 10.9.9.9', '10.9.9.9'],
  ['empty entry counts as garbage', '10.0.0.5', '1.2.3.4, ', '10.0.0.5'],
  ['all hops trusted: the left-most', '10.0.0.5', '10.0.0.7, 10.0.0.6', '10.0.0.7'],
  ['IPv4-mapped IPv6 peer is its IPv4 address (trusted)', '::ffff:10.0.0.5', '1.2.3.4', '1.2.3.4'],
  ['IPv4-mapped IPv6 hop is normalised', '10.0.0.5', '::ffff:1.2.3.4', '1.2.3.4'],
  ['IPv4-mapped untrusted peer without header', '::ffff:203.0.113.9', undefined, '203.0.113.9'],
  ['IPv4-mapped hop in upper case', '10.0.0.5', '::FFFF:8.8.8.8', '8.8.8.8'],
  ['IPv4-mapped hop in hex', '10.0.0.5', '::ffff:808:808', '8.8.8.8'],
  ['IPv4-mapped hop written out, in brackets with a port', '10.0.0.5', '[0:0:0:0:0:ffff:8.8.8.8]:443', '8.8.8.8'],
  ['IPv4-mapped peer in hex, untrusted', '::ffff:cb00:7109', undefined, '203.0.113.9'],
  ['IPv4-mapped trusted peer in another spelling is still trusted', '0:0:0:0:0:FFFF:10.0.0.5', '8.8.8.8', '8.8.8.8'],
  ['an IPv6 hop is written canonically', 'fd00::1', '2001:DB8:0:0::1', '2001:db8::1'],
  ['IPv6 hops', 'fd00::1', '2001:db8::1, fd00::2', '2001:db8::1'],
  ['hops with ports', '10.0.0.5', '[2001:db8::1]:443, 1.2.3.4:5555', '1.2.3.4'],
  ['a repeated header is one list: the proxy-appended last line counts', '10.0.0.5', ['6.6.6.6', '1.2.3.4'], '1.2.3.4'],
]

for (const [what, peer, xff, want] of XFF) {
  test(`client address: ${what}`, () => {
    const headers: Record<string, string | string[]> = xff === undefined ? {} : { 'X-Forwarded-For': xff }
    assert.equal(view({ peer, headers }, TRUSTED).ip, want)
  })
}

test('client address: no trusted proxies configured → the peer, whatever the header says', () => {
  assert.equal(view({ peer: '10.0.0.5', headers: { 'x-forwarded-for': '1.2.3.4' } }).ip, '10.0.0.5')
  assert.equal(clientIp('10.0.0.5', '1.2.3.4', undefined), '10.0.0.5')
})

test('client address: X_Forwarded_For (underscore) is not X-Forwarded-For for the address walk', () => {
  const v = view({ peer: '10.0.0.5', headers: { X_Forwarded_For: '6.6.6.6', 'X-Forwarded-For': '1.2.3.4' } }, TRUSTED)
  assert.equal(v.ip, '1.2.3.4')
  const only = view({ peer: '10.0.0.5', headers: { X_Forwarded_For: '6.6.6.6' } }, TRUSTED)
  assert.equal(only.ip, '10.0.0.5')
})

test('headers: case-insensitive; a bundle name with _ means -, a request header with _ is another header', () => {
  const v = view({ headers: { 'X-API-Key': 'k1', x_tenant: 't1' } })
  const key = compileDescriptor('header:x_api_key')
  const tenant = compileDescriptor('header:X-Tenant')
  const underscored = compileDescriptor('header:x_tenant')
  assert.ok(key.ok && tenant.ok && underscored.ok)
  assert.equal(key.extract(v), 'k1', 'header:x_api_key (nginx $http_x_api_key spelling) is X-Api-Key')
  assert.equal(tenant.extract(v), undefined, 'x_tenant is not X-Tenant')
  assert.equal(underscored.extract(v), undefined, 'nor does header:x_tenant read x_tenant (nginx drops such headers)')
  assert.equal(v.header(headerKey('X_API-KEY')), 'k1')
  assert.equal(v.header('x-missing'), undefined)
  // The junk X_Api_Key sent first is not the key: the real X-Api-Key after it is.
  const smuggled = view({ headers: { X_Api_Key: 'junk', 'X-Api-Key': 'REAL' } })
  assert.equal(key.extract(smuggled), 'REAL')
  assert.equal(smuggled.header('x-api-key'), 'REAL')
  // Names of the same length that differ do not match; nor does a non-ASCII look-alike (U+212A KELVIN SIGN is "k" lower-cased).
  const spelled = view({ headers: { 'X-Tenanx': 'no', 'X-Api-\u212Aey': 'kelvin' } })
  assert.equal(spelled.header('x-tenant'), undefined)
  assert.equal(spelled.header('x-api-key'), undefined)
})

test('headers: a keyed header repeated with different values is refused; repeated with one value it is that value', () => {
  const key = compileDescriptor('header:x-api-key')
  assert.ok(key.ok)
  assert.equal(key.extract(view({ headers: { 'X-Api-Key': ['k1', 'k1'] } })), 'k1')
  for (const values of [
    ['junk', 'REAL'],
    ['REAL', 'junk'],
    ['', 'REAL'],
  ])
    assert.throws(() => key.extract(view({ headers: { 'X-Api-Key': values } })), AmbiguousRequest, values.join(' / '))
  assert.throws(() => key.extract(view({ headers: { 'x-api-key': 'a', 'X-API-KEY': 'b' } })), /x-api-key is repeated/)
  // The first value stays what header() (costs, X-Country-Code …) reads.
  assert.equal(view({ headers: { 'X-Api-Key': ['a', 'b'] } }).header('x-api-key'), 'a')
})

test('query: a keyed parameter repeated with different values is refused', () => {
  const q = compileDescriptor('query:tenant')
  assert.ok(q.ok)
  assert.equal(q.extract(view({ query: 'tenant=a&tenant=a' })), 'a')
  assert.throws(() => q.extract(view({ query: 'tenant=junk&tenant=REAL' })), AmbiguousRequest)
  assert.throws(() => q.extract(view({ query: 'tenant=&tenant=REAL' })), AmbiguousRequest)
  assert.equal(q.extract(view({ query: 'other=1' })), undefined)
})

test('jwt: two different Authorization lines, or two bearer tokens joined in one, are refused', () => {
  const sub = compileDescriptor('jwt:sub')
  assert.ok(sub.ok)
  const a = bearer({ sub: 'alice' })
  const b = bearer({ sub: 'bob' })
  assert.equal(sub.extract(view({ headers: { Authorization: [a, a] } })), 'alice')
  assert.throws(() => sub.extract(view({ headers: { Authorization: [a, b] } })), AmbiguousRequest)
  assert.throws(() => sub.extract(view({ headers: { Authorization: `${a},${b}` } })), AmbiguousRequest)
  // Another scheme may hold commas (Digest, AWS SigV4): it has no claims, and no ambiguity.
  assert.equal(sub.extract(view({ headers: { Authorization: 'Digest username="u", realm="r"' } })), undefined)
})

test('query: first value, percent-decoded; empty is missing for descriptors', () => {
  const v = view({ query: 'tier=gold&tier=silver&name=a%20b&empty=' })
  assert.equal(v.query('tier'), 'gold', 'query() (costs) reads the first; a limit key refuses the pair')
  assert.equal(v.query('name'), 'a b')
  const empty = compileDescriptor('query:empty')
  assert.ok(empty.ok)
  assert.equal(empty.extract(v), undefined)
})

test('JWT: claims of a Bearer token; numbers and booleans become strings', () => {
  const v = view({ jwt: { sub: 'alice', n: 42, f: 1.5, b: true, z: false, o: { a: 1 }, a: [1], nul: null, e: '' } })
  assert.equal(v.claim('sub'), 'alice')
  assert.equal(v.claim('n'), '42')
  assert.equal(v.claim('f'), '1.5')
  assert.equal(v.claim('b'), 'true')
  assert.equal(v.claim('z'), 'false')
  for (const missing of ['o', 'a', 'nul', 'e', 'absent']) assert.equal(v.claim(missing), undefined, missing)
  assert.equal(claimString(0), '0')
})

const MALFORMED: [string, string | undefined][] = [
  ['no header', undefined],
  ['not Bearer', `Basic ${b64url({ sub: 'x' })}`],
  ['two segments', `Bearer a.${b64url({ sub: 'x' })}`],
  ['four segments', `Bearer a.${b64url({ sub: 'x' })}.c.d`],
  ['payload not base64url', 'Bearer a.!!!.c'],
  ['payload not JSON', `Bearer a.${Buffer.from('{nope').toString('base64url')}.c`],
  ['payload a JSON array', `Bearer a.${b64url(['sub'])}.c`],
  ['payload a JSON string', `Bearer a.${b64url('sub')}.c`],
  ['payload JSON null', `Bearer a.${b64url(null)}.c`],
  ['empty token', 'Bearer '],
  ['empty payload', 'Bearer a..c'],
]

for (const [what, auth] of MALFORMED) {
  test(`JWT malformed (${what}) → no claims, no throw`, () => {
    const v = view({ headers: auth === undefined ? {} : { Authorization: auth } })
    assert.equal(v.claims, undefined)
    assert.equal(v.claim('sub'), undefined)
    assert.equal(decodeBearer(auth), undefined)
  })
}

test('JWT: the scheme is case-insensitive and padding is tolerated', () => {
  const payload = Buffer.from(JSON.stringify({ sub: 'bob' })).toString('base64')
  assert.equal(view({ headers: { authorization: `bearer a.${payload.replace(/\+/g, '-').replace(/\//g, '_')}.c` } }).claim('sub'), 'bob')
})

test('descriptors: ip:address, ip:country, ip:tor, ip:type and unknown keys', () => {
  const v = view({ peer: '192.0.2.1', headers: { 'X-Country-Code': ' us ', 'X-Tor-Exit': 'YES', 'X-ASN-Type': 'Hosting' } })
  const get = (k: string): string | undefined => {
    const d = compileDescriptor(k)
    assert.ok(d.ok, k)
    return d.extract(v)
  }
  assert.equal(get('ip:address'), '192.0.2.1')
  assert.equal(get('ip:country'), 'US')
  assert.equal(get('ip:tor'), 'true')
  assert.equal(get('ip:type'), 'hosting')
  assert.equal(compileDescriptor('ip:city').ok, false)
  assert.equal(compileDescriptor('cookie:x').ok, false)
  assert.equal(compileDescriptor('ua:bot').ok, true)
  assert.equal(compileDescriptor('ua:bot_category').ok, true)
  assert.equal(compileDescriptor('ua:browser').ok, false)
})

test('the BlockList of trusted proxies is what clientIp consults', () => {
  const list = new BlockList()
  list.addAddress('127.0.0.1')
  assert.equal(clientIp('127.0.0.1', '198.51.100.1', list), '198.51.100.1')
  assert.equal(clientIp('127.0.0.2', '198.51.100.1', list), '127.0.0.2')
})

test('path normalisation: dot segments, slash runs, unreserved percent-escapes, absolute form', () => {
  const cases: [string, string][] = [
    ['/', '/'],
    ['/a/b/', '/a/b/'],
    ['/public/../admin/x', '/admin/x'],
    ['//admin///x', '/admin/x'],
    ['/%61dmin/x', '/admin/x'],
    ['/a/%2fb', '/a/%2Fb'],
    ['/a%20b', '/a%20b'],
    ['/a/./b', '/a/b'],
    ['/a/b/..', '/a/'],
    ['/..', '/'],
    ['/a/b/../../../c', '/c'],
    ['/a/..b/.c', '/a/..b/.c'],
    ['http://h:80/x', '/x'],
    ['https://h', '/'],
    ['*', '*'],
    ['/a\\b', '/a/b'],
    ['/a/b#x', '/a/b'],
    ['/a;p=1/b', '/a;p=1/b'],
  ]
  for (const [raw, want] of cases) assert.equal(readTarget(raw, 'h', 'keep').path, want, raw)
})
