/**
 * Path spellings against the parsers backends route with. Variants of
 * `/api/expensive` (slashes doubled, backslashed or escaped; dot segments
 * plain or escaped; escaped letters; `;` parameters; leading `//host`;
 * fragments and queries; case; trailing slashes) go through four models of
 * what a backend routes:
 *
 * - WHATWG URL: `new URL(target, 'http://h').pathname` (Node's own URL);
 * - Node's `url.parse(target).pathname` (Express reads it through parseurl;
 *   Express routing is case-insensitive and takes an optional trailing slash);
 * - nginx's `$uri`: a transcription of ngx_http_parse_complex_uri
 *   (src/http/ngx_http_parse.c, merge_slashes on, not Win32);
 * - Tomcat/Spring: `;` parameters stripped (CoyoteAdapter.parsePathParameters),
 *   then decoded with `%2F`/`%5C` and `\` refused, then `//` merged and dot
 *   segments resolved (CoyoteAdapter.normalize).
 *
 * Whatever a model routes to `/api/expensive` must be counted by the policy
 * `pathExact /api/expensive` + `pathPrefix /api/expensive/` as the gateway
 * reads it (request/target.ts, then the route index), or refused (400).
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { parse as urlParse } from 'node:url'
import fc from 'fast-check'
import { type EncodedSlashes, readTarget } from '../../src/request/target.js'
import { bundle, compile, policy, rule, tb } from '../unit/engine-harness.js'

const TARGET = '/api/expensive'
const index = compile(
  bundle([
    policy('exact', [rule('e', [], tb(1, 1))], {}, { pathExact: TARGET }),
    policy('prefix', [rule('p', [], tb(1, 1))], {}, { pathPrefix: `${TARGET}/` }),
  ]),
).index

/** What the gateway does with a request whose target is `t`. */
function gateway(t: string, slashes: EncodedSlashes): 'counted' | 'refused' | 'missed' {
  const r = readTarget(t, 'h', slashes)
  if (r.refused !== undefined) return 'refused'
  return index.match('GET', r.path, 'h', r.alsoPaths).length > 0 ? 'counted' : 'missed'
}

function whatwg(t: string): string | null {
  try {
    return new URL(t, 'http://h').pathname
  } catch {
    return null
  }
}

function nodeUrlParse(t: string): string | null {
  return urlParse(t).pathname
}

/** nginx's `usual` table (ngx_http_parse.c, not Win32): characters copied as they are. */
const USUAL = [0x00000000, 0x7fff37d6, 0xffffffff, 0x7fffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff]
const isUsual = (ch: number): boolean => (USUAL[ch >> 5]! & (1 << (ch & 0x1f))) !== 0

/**
 * nginx's `$uri` for an origin-form target, or null where nginx answers 400:
 * ngx_http_parse_request_line refuses bytes ≤ 0x20 and 0x7f; then
 * ngx_http_parse_complex_uri, state by state (merge_slashes on). An escape
 * is decoded and the decoded character handled in the state it arrived in,
 * so `%2F` is a separator and `%2E` a dot; `%25`, `%23` and `%3F` are kept
 * literally; `#` ends the path, `?` starts the arguments; `..` above `/` is 400.
 */
function nginxUri(target: string): string | null {
  if (target[0] !== '/') return null
  for (let k = 0; k < target.length; k++) {
    const c = target.charCodeAt(k)
    if (c <= 0x20 || c === 0x7f) return null
  }
  const p = `${target}\n` // "after the URI there is always at least one character: the line feed"
  const end = target.length
  const out: number[] = []
  let u = 0
  let i = 0
  let ch = p.charCodeAt(i++)
  type S = 'usual' | 'slash' | 'dot' | 'dot_dot' | 'quoted' | 'quoted_second'
  let state: S = 'usual'
  let quotedState: S = 'usual'
  let decoded = 0
  const SLASH = 47
  const DOT = 46
  const back = (): boolean => {
    // u -= 4, then back to the previous '/' (sw_dot_dot)
    u -= 4
    for (;;) {
      if (u < 0) return false
      if (out[u] === SLASH) {
        u++
        return true
      }
      u--
    }
  }
  const result = (): string => String.fromCharCode(...out.slice(0, u))
  while (i <= end) {
    switch (state) {
      case 'usual':
        if (isUsual(ch)) {
          out[u++] = ch
          ch = p.charCodeAt(i++)
          break
        }
        if (ch === SLASH) {
          state = 'slash'
          out[u++] = ch
        } else if (ch === 37 /* % */) {
          quotedState = state
          state = 'quoted'
        } else if (ch === 63 /* ? */) return result()
        else if (ch === 35 /* # */) return result()
        else out[u++] = ch // '.', '+', and the rest
        ch = p.charCodeAt(i++)
        break
      case 'slash':
        if (isUsual(ch)) {
          state = 'usual'
          out[u++] = ch
          ch = p.charCodeAt(i++)
          break
        }
        if (ch === SLASH) {
          // merge_slashes: not written
        } else if (ch === DOT) {
          state = 'dot'
          out[u++] = ch
        } else if (ch === 37) {
          quotedState = state
          state = 'quoted'
        } else if (ch === 63 || ch === 35) return result()
        else {
          state = 'usual'
          out[u++] = ch
        }
        ch = p.charCodeAt(i++)
        break
      case 'dot':
        if (isUsual(ch)) {
          state = 'usual'
          out[u++] = ch
          ch = p.charCodeAt(i++)
          break
        }
        if (ch === SLASH) {
          state = 'slash'
          u--
        } else if (ch === DOT) {
          state = 'dot_dot'
          out[u++] = ch
        } else if (ch === 37) {
          quotedState = state
          state = 'quoted'
        } else if (ch === 63 || ch === 35) {
          u--
          return result()
        } else {
          state = 'usual'
          out[u++] = ch
        }
        ch = p.charCodeAt(i++)
        break
      case 'dot_dot':
        if (isUsual(ch)) {
          state = 'usual'
          out[u++] = ch
          ch = p.charCodeAt(i++)
          break
        }
        if (ch === SLASH || ch === 63 || ch === 35) {
          if (!back()) return null
          if (ch !== SLASH) return result()
          state = 'slash'
        } else if (ch === 37) {
          quotedState = state
          state = 'quoted'
        } else {
          state = 'usual'
          out[u++] = ch
        }
        ch = p.charCodeAt(i++)
        break
      case 'quoted': {
        const h = Number.parseInt(String.fromCharCode(ch), 16)
        if (Number.isNaN(h)) return null
        decoded = h
        state = 'quoted_second'
        ch = p.charCodeAt(i++)
        break
      }
      case 'quoted_second': {
        const h = Number.parseInt(String.fromCharCode(ch), 16)
        if (Number.isNaN(h)) return null
        ch = (decoded << 4) + h
        if (ch === 37 || ch === 35 || ch === 63) {
          // `%25`, `%23`, `%3F`: the character itself, never its meaning
          state = 'usual'
          out[u++] = ch
          ch = p.charCodeAt(i++)
        } else if (ch === 0) return null
        else state = quotedState // the decoded character is handled in the state it arrived in
        break
      }
    }
  }
  if (state === 'quoted' || state === 'quoted_second') return null
  if (state === 'dot') u--
  else if (state === 'dot_dot' && !back()) return null
  return result()
}

/** Tomcat (and Spring on it) with its defaults: what the servlet is chosen by, or null for a 400. */
function tomcat(target: string): string | null {
  let t = target
  for (const stop of ['#', '?']) if (t.includes(stop)) t = t.slice(0, t.indexOf(stop))
  if (t.includes('\\')) return null // ALLOW_BACKSLASH=false
  t = t.replace(/;[^/]*/g, '') // parsePathParameters
  if (/%(2f|5c)/i.test(t)) return null // encodedSolidusHandling=reject
  try {
    t = decodeURIComponent(t)
  } catch {
    return null
  }
  t = t.replace(/\/{2,}/g, '/')
  const out: string[] = []
  const segs = t.split('/')
  for (let k = 1; k < segs.length; k++) {
    const s = segs[k]!
    if (s === '.') {
      if (k === segs.length - 1) out.push('')
    } else if (s === '..') {
      if (out.length === 0) return null // above the root: 400
      out.pop()
      if (k === segs.length - 1) out.push('')
    } else out.push(s)
  }
  return `/${out.join('/')}`
}

/** Express: url.parse's pathname, routed case-insensitively with an optional trailing slash. */
function expressRoutes(t: string): boolean {
  const p = nodeUrlParse(t)?.toLowerCase()
  return p === TARGET || p === `${TARGET}/`
}

const MODELS: [string, (t: string) => boolean][] = [
  ['WHATWG URL', (t) => whatwg(t) === TARGET],
  ['url.parse', (t) => nodeUrlParse(t) === TARGET],
  ['Express', expressRoutes],
  ['nginx $uri', (t) => nginxUri(t) === TARGET],
  ['Tomcat', (t) => tomcat(t) === TARGET],
]

const hex = (c: string, lower: boolean): string => {
  const h = c.charCodeAt(0).toString(16).toUpperCase()
  return `%${lower ? h.toLowerCase() : h}`
}
/** A segment name as written, or with some letters escaped or in upper case. */
const spelled = (name: string): fc.Arbitrary<string> =>
  fc.oneof(
    { arbitrary: fc.constant(name), weight: 3 },
    {
      arbitrary: fc
        .array(fc.constantFrom('plain', 'plain', 'upper', 'escaped', 'escaped-lower'), { minLength: name.length, maxLength: name.length })
        .map((how) =>
          [...name]
            .map((c, i) =>
              how[i] === 'upper' ? c.toUpperCase() : how[i] === 'escaped' ? hex(c, false) : how[i] === 'escaped-lower' ? hex(c, true) : c,
            )
            .join(''),
        ),
      weight: 1,
    },
  )
/** `plain` half the time, else one of the tricks. */
const mostly = (plain: string, ...tricks: string[]): fc.Arbitrary<string> => fc.oneof(fc.constant(plain), fc.constantFrom(...tricks))
const lead = mostly('/', '//', '//h/', '/\\h/', '///h/', '/\\/h/', '/./', '/x/../', '/..;/', '/x;y/../', '/%2e/', '//h/x/../', '/x/..;/')
const separator = mostly(
  '/',
  '//',
  '\\',
  '\\\\',
  '/\\',
  '%2F',
  '%2f',
  '%5C',
  '%5c',
  '/./',
  '/%2e/',
  '/%2E/',
  '/x/../',
  '/x/%2e%2e/',
  '/x/.%2e/',
  '/x/..%2f',
  '/x/..%2F',
  '%2f..%2f',
  '/;p/',
  '/x;/../',
  '/x/..;/',
  '/.;/',
)
const params = mostly('', ';x=1', ';', ';jsessionid=A1')
const tail = mostly('', '/', '/.', '/x/..', '//', '#x', '#/../x', '?q=1', '?q=/../x#y', '/#x', ';x#y', '%2f', '/%2e')
const variant = fc.tuple(lead, spelled('api'), params, separator, spelled('expensive'), params, tail).map((parts) => parts.join(''))
// Free-form paths over the characters that matter, to reach spellings the grammar above misses.
const freeform = fc
  .array(fc.constantFrom('/', '.', '%', '2', 'f', 'e', '\\', ';', '#', '?', 'api', 'expensive', 'x'), { maxLength: 10 })
  .map((cs) => `/${cs.join('')}`)

for (const slashes of ['reject', 'decode', 'keep'] as const) {
  test(`every variant a backend routes to ${TARGET} is counted (FAIRVISOR_ENCODED_SLASHES=${slashes})`, () => {
    // keep: an escaped slash is data, as WHATWG URL, Express and Tomcat read it; nginx's $uri decodes it (docs/security.md).
    const models = slashes === 'keep' ? MODELS.filter(([name]) => name !== 'nginx $uri') : MODELS
    const seen = new Map<string, number>()
    fc.assert(
      fc.property(fc.oneof({ arbitrary: variant, weight: 4 }, { arbitrary: freeform, weight: 1 }), (t) => {
        for (const [name, routes] of models) {
          if (!routes(t)) continue
          seen.set(name, (seen.get(name) ?? 0) + 1)
          const got = gateway(t, slashes)
          if (slashes === 'reject')
            assert.notEqual(got, 'missed', `${name} routes ${JSON.stringify(t)} to ${TARGET}; the gateway did not count it`)
          else assert.equal(got, 'counted', `${name} routes ${JSON.stringify(t)} to ${TARGET}; the gateway says ${got}`)
        }
      }),
      { numRuns: 20_000 },
    )
    // The property is not vacuous: every model routed a good share of the variants to the target.
    for (const [name] of models) assert.ok((seen.get(name) ?? 0) > 100, `${name} routed only ${seen.get(name) ?? 0} variants to ${TARGET}`)
  })
}

test('the models agree with the spellings the issue lists (sanity of the models themselves)', () => {
  assert.equal(whatwg('/api/expensive#x'), TARGET)
  assert.equal(whatwg('/api\\expensive'), TARGET)
  assert.equal(whatwg('//h/api/expensive'), TARGET)
  assert.equal(whatwg('/api%2Fexpensive'), '/api%2Fexpensive')
  assert.equal(nodeUrlParse('/api\\expensive#x'), TARGET)
  assert.equal(nginxUri('/api%2Fexpensive'), TARGET)
  assert.equal(nginxUri('/x/..%2fapi/expensive'), TARGET)
  assert.equal(nginxUri('//api//expensive/.'), `${TARGET}/`)
  assert.equal(nginxUri('/api/expensive#x'), TARGET)
  assert.equal(nginxUri('/../api'), null)
  assert.equal(nginxUri('/a%25%2F'), '/a%/')
  assert.equal(tomcat('/x/..;/api/expensive'), TARGET)
  assert.equal(tomcat('/api/expensive;x=1'), TARGET)
  assert.equal(tomcat('/api%2Fexpensive'), null)
  assert.ok(expressRoutes('/API/Expensive/'))
})
