/**
 * Raw request heads for the lane tests (test/e2e/lane-*.test.ts), drawn by
 * fast-check: credential headers repeated in other spellings and cases, odd
 * name case, tabs and spaces in values, obs-fold and bare LF, absolute- and
 * asterisk-form targets, `//`, `%2F` and encoded dots, long URLs, heads past
 * 1,000 and 2,000 lines, HTTP/1.0, Connection: close, Content-Length: 0,
 * Transfer-Encoding on a GET, Expect, upgrades, HEAD and bodies.
 */
import fc from 'fast-check'

const b64 = (v: unknown): string => Buffer.from(JSON.stringify(v)).toString('base64url')
export const jwtOf = (sub: string): string => `Bearer ${b64({ alg: 'none' })}.${b64({ sub })}.x`

/** Spellings a client could give one header name. */
const caseOf = (name: string): fc.Arbitrary<string> =>
  fc.constantFrom(
    name,
    name.toUpperCase(),
    name.replace(/(^|-)([a-z])/g, (_m, d: string, c: string) => d + c.toUpperCase()),
    name.replace(/-/g, '_'),
  )
const small = fc.constantFrom('a', 'b', 'alice', 'bob', ' padded ', '\tt\t', 'x y', 'ünï', '')

const header: fc.Arbitrary<[string, string]> = fc.oneof(
  fc.tuple(caseOf('x-api-key'), small),
  fc.tuple(caseOf('x-user'), small),
  fc.tuple(caseOf('user-agent'), fc.constantFrom('curl/8', 'Googlebot/2.1', 'ua ua', '')),
  fc.tuple(caseOf('authorization'), small.map(jwtOf)),
  fc.tuple(caseOf('x-forwarded-for'), fc.constantFrom('1.2.3.4', '5.6.7.8, 127.0.0.1', '9.9.9.9, 1.2.3.4', 'junk', '::ffff:1.2.3.4')),
  fc.tuple(caseOf('connection'), fc.constantFrom('close', 'keep-alive', 'x-user', 'Close, x-api-key')),
  fc.tuple(caseOf('host'), fc.constantFrom('h', 'H', 'other:80', '')),
  fc.tuple(fc.constantFrom('content-length', 'Content-Length'), fc.constantFrom('0', '3')),
  fc.tuple(fc.constantFrom('transfer-encoding', 'Transfer-Encoding'), fc.constantFrom('chunked')),
  fc.tuple(fc.constantFrom('expect'), fc.constantFrom('100-continue', 'nothing')),
  fc.tuple(fc.constantFrom('upgrade'), fc.constantFrom('websocket')),
  fc.tuple(fc.stringMatching(/^[A-Za-z][A-Za-z0-9!#$%&'*+.^_`|~-]{0,12}$/), small),
)

const target = fc.oneof(
  fc.constantFrom('/', '/a/b', '//x//y', '/%2Fa', '/a%2fb', '/a/%2e%2e/b', '/a/./b/../c', '/%61dmin', '/a;p/b', '/a\\b'),
  fc.constantFrom('?k=1', '?k=2&k=2', '?k=1&k=3', '?k=%31', '?cost=9', '?k').map((q) => `/q${q}`),
  fc.constantFrom('http://h/abs?k=4', 'http://other/abs', 'HTTP://h/x', 'h:80', '*'),
  fc.nat({ max: 9000 }).map((n) => `/long/${'x'.repeat(n)}?k=long`),
)

export interface Drawn {
  method: string
  head: string
}

/** How a head's lines end: CRLF, or (refused by the parser) a bare LF, and an obs-fold inside a value. */
const ending = fc.constantFrom('\r\n', '\r\n', '\r\n', '\n')

export const request: fc.Arbitrary<Drawn> = fc
  .record({
    method: fc.constantFrom('GET', 'GET', 'GET', 'HEAD', 'POST', 'DELETE', 'OPTIONS'),
    target,
    version: fc.constantFrom('HTTP/1.1', 'HTTP/1.1', 'HTTP/1.1', 'HTTP/1.0'),
    host: fc.constantFrom(true, true, true, false),
    headers: fc.array(header, { maxLength: 8 }),
    filler: fc.constantFrom(0, 0, 0, 0, 0, 40, 1100, 2100),
    fold: fc.constantFrom(false, false, false, false, true),
    eol: ending,
    body: fc.constantFrom('', '', 'abc'),
  })
  .map((r) => {
    const lines = [`${r.method} ${r.target} ${r.version}`]
    if (r.host) lines.push('Host: h')
    for (let i = 0; i < r.filler; i++) lines.push(`f${i}: v`)
    for (const [n, v] of r.headers) lines.push(`${n}: ${v}`)
    if (r.fold) lines.push('X-User: folded', ' continued')
    let body: string = r.body
    if (body !== '') {
      // A body with its own framing, after any Content-Length or Transfer-Encoding drawn above.
      lines.push(`Content-Length: ${body.length}`)
    }
    if (lines.some((l) => /^transfer-encoding:/i.test(l))) body = `${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`
    return { method: r.method, head: lines.join(r.eol) + r.eol + r.eol + body }
  })

/** The last request of every sequence: answered with Connection: close, so the gateway ends the connection. */
export const CLOSE: Drawn = { method: 'GET', head: 'GET /end HTTP/1.1\r\nHost: h\r\nX-User: end\r\nConnection: close\r\n\r\n' }
