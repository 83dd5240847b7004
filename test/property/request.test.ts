/**
 * Property tests over what a client controls: X-Forwarded-For, query strings,
 * JWTs and headers. The request view must never throw (a throw on the request
 * path is a 500) and the client address is always an IP address.
 */
import assert from 'node:assert/strict'
import { BlockList, isIP } from 'node:net'
import { test } from 'node:test'
import fc from 'fast-check'
import { AmbiguousRequest } from '../../src/errors.js'
import { clientIp } from '../../src/request/client-ip.js'
import { claimString, decodeBearer } from '../../src/request/jwt.js'
import { readPath } from '../../src/request/normalise.js'
import { RequestView } from '../../src/request/view.js'
import { compileDescriptor } from '../../src/request/descriptors.js'

const RUNS = { numRuns: 500 }
const trusted = new BlockList()
trusted.addSubnet('10.0.0.0', 8, 'ipv4')
trusted.addSubnet('fd00::', 8, 'ipv6')

const ip = fc.oneof(fc.ipV4(), fc.ipV6(), fc.constantFrom('10.1.2.3', '::ffff:10.0.0.1', 'fd00::1'))
const hop = fc.oneof(
  ip,
  ip.map((a) => (a.includes(':') ? `[${a}]:443` : `${a}:8080`)),
  fc.string(),
  fc.constantFrom('unknown', '', ' ', '[', '[::1', '1.2.3.4:', '::ffff:', 'a:b:c'),
)
const xff = fc.oneof(
  fc.string(),
  fc.array(hop, { maxLength: 6 }).map((h) => h.join(',')),
  fc.array(hop, { maxLength: 6 }).map((h) => h.join(' , ')),
)

test('clientIp never throws and always returns an IP address', () => {
  fc.assert(
    fc.property(ip, fc.option(xff, { nil: undefined }), fc.boolean(), (peer, header, useTrust) => {
      const got = clientIp(peer, header, useTrust ? trusted : undefined)
      assert.notEqual(isIP(got), 0, `${peer} / ${JSON.stringify(header)} → ${JSON.stringify(got)}`)
    }),
    RUNS,
  )
})

const b64 = (s: string): string => Buffer.from(s).toString('base64url')
const jwtish = fc.oneof(
  fc.string(),
  fc.tuple(fc.string(), fc.string(), fc.string()).map(([a, b, c]) => `${a}.${b}.${c}`),
  fc.tuple(fc.jsonValue(), fc.string()).map(([payload, sig]) => `${b64('{"alg":"none"}')}.${b64(JSON.stringify(payload) ?? '')}.${sig}`),
  fc.tuple(fc.string(), fc.string()).map(([p, s]) => `${b64('{}')}.${b64(p)}.${s}`),
)
const authorization = fc.oneof(
  jwtish.map((t) => `Bearer ${t}`),
  jwtish.map((t) => `bearer   ${t}  `),
  fc.string(),
)

test('decodeBearer never throws, and yields claims only as a plain object', () => {
  fc.assert(
    fc.property(fc.option(authorization, { nil: undefined }), (h) => {
      const c = decodeBearer(h)
      if (c !== undefined) assert.ok(c !== null && typeof c === 'object' && !Array.isArray(c))
      if (c) for (const v of Object.values(c)) claimString(v)
    }),
    RUNS,
  )
})

const headerName = fc.oneof(
  fc.constantFrom(
    'authorization',
    'x-user',
    'X_User',
    'x-forwarded-for',
    'x-country-code',
    'x-asn',
    'x-asn-type',
    'x-tor-exit',
    'user-agent',
    'host',
  ),
  fc.string(),
)
const rawQuery = fc.oneof(
  fc.string(),
  fc.array(fc.tuple(fc.string(), fc.string())).map((kv) => kv.map(([k, v]) => `${k}=${v}`).join('&')),
  fc.constantFrom('%', '%zz', 'a=%E0%A4%A', '&&=&', 'k=1&k=2', '=x'),
)
const DESCRIPTORS = ['jwt:sub', 'jwt:plan', 'header:x-user', 'query:k', 'ip:address', 'ip:country', 'ip:asn', 'ip:type', 'ip:tor']

/** A descriptor's value; an input in conflicting forms (AmbiguousRequest, answered 400) is the one error allowed. */
function extractOrAmbiguous(key: string, view: RequestView): string | undefined {
  const d = compileDescriptor(key)
  assert.ok(d.ok)
  try {
    return d.extract(view)
  } catch (err) {
    assert.ok(err instanceof AmbiguousRequest, `${key}: ${String(err)}`)
    return undefined
  }
}

test('RequestView: query(), header(), claims and every descriptor never throw on arbitrary input (but AmbiguousRequest)', () => {
  fc.assert(
    fc.property(
      rawQuery,
      fc.array(fc.tuple(headerName, fc.oneof(fc.string(), authorization, xff)), { maxLength: 6 }),
      ip,
      fc.string(),
      fc.string(),
      (q, headers, peer, name, host) => {
        const view = new RequestView({ method: 'GET', path: '/x', rawQuery: q, host, rawHeaders: headers.flat(), peer }, trusted)
        view.query(name)
        view.query('k')
        view.header(name)
        void view.claims
        for (const key of DESCRIPTORS) {
          const v = extractOrAmbiguous(key, view)
          assert.ok(v === undefined || typeof v === 'string')
        }
        assert.notEqual(isIP(view.ip), 0)
      },
    ),
    RUNS,
  )
})

test('readPath: every reading has no dot segment and no slash run, and reading it again changes nothing', () => {
  // Paths over the characters the fast check looks at, so `/.`, `/..`, `//`, `%`, `\\` and `;` turn up in every position.
  const path = fc.array(fc.constantFrom('/', '.', 'a', '%', '2', 'e', 'f', '\\', ';'), { maxLength: 14 }).map((cs) => `/${cs.join('')}`)
  const slashes = fc.constantFrom('decode' as const, 'keep' as const)
  fc.assert(
    fc.property(path, slashes, (raw, mode) => {
      const r = readPath(raw, mode)
      for (const p of [r.path, ...(r.also ?? [])]) {
        assert.equal(readPath(p, mode).path, p, `not a fixed point: ${raw} → ${p}`)
        assert.ok(!p.includes('//'), `slash run left in ${p} (from ${raw})`)
        assert.ok(!p.includes('\\'), `backslash left in ${p} (from ${raw})`)
        assert.ok(!/\/\.\.?(?:\/|$)/.test(p), `dot segment left in ${p} (from ${raw})`)
      }
    }),
    { numRuns: 5000 },
  )
})
