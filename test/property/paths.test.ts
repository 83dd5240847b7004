/**
 * Path spellings against the parsers backends route with. Variants of
 * `/api/expensive` (slashes doubled, backslashed or escaped; dot segments
 * plain or escaped; escaped letters; `;` parameters; leading `//host`;
 * fragments and queries; case; trailing slashes) go through five models of
 * what a backend routes:
 *
 * - WHATWG URL: `new URL(target, 'http://h').pathname` (Node's own URL);
 * - Node's `url.parse(target).pathname`, and Express on it (through parseurl;
 *   Express routing is case-insensitive and takes an optional trailing slash);
 * - nginx's `$uri`: a transcription of ngx_http_parse_complex_uri
 *   (src/http/ngx_http_parse.c, merge_slashes on, not Win32; test/helpers/path-models.ts,
 *   which gave nginx 1.22's own `$uri` on 3,000 sampled targets);
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
import fc from 'fast-check'
import { type EncodedSlashes, readTarget } from '../../src/request/target.js'
import { expressRoutes, nginxUri, nodeUrlParse, TARGET, tomcat, whatwg } from '../helpers/path-models.js'
import { bundle, compile, policy, rule, tb } from '../helpers/engine-harness.js'

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
