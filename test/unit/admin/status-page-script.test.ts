/**
 * The status page's script (admin/status-page-script.ts), read as text: it is
 * valid JavaScript as embedded, it calls the admin API of its own origin and
 * nothing else, keeps the token in sessionStorage only and never turns a
 * string into markup. Its behaviour in a browser is test/e2e/status-page.test.ts.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Script } from 'node:vm'
import { RENDER } from '../../../src/admin/status-page-render.js'
import { SCRIPT } from '../../../src/admin/status-page-script.js'

test('the page script (helpers then script) compiles as one classic script', () => {
  assert.doesNotThrow(() => new Script(RENDER + SCRIPT, { filename: 'status-page.js' }))
})

test('embedded as written: no template literal, backslash or closing script tag', () => {
  assert.doesNotMatch(SCRIPT, /[`\\]|\$\{/)
  assert.doesNotMatch(SCRIPT, /<\/script/i)
})

test('it calls only relative paths of its own origin: the admin API and /readyz', () => {
  // A lone '/' joins policy and rule in messages: paths have more.
  const paths = [...SCRIPT.matchAll(/'(\/[^']+)'/g)].map((m) => m[1]!).sort()
  assert.deepEqual(paths, ['/readyz', '/v1/admin/bundle', '/v1/admin/counters?', '/v1/admin/stats', '/v1/admin/top?n=20'])
  assert.doesNotMatch(SCRIPT, /:\/\/|'\/\//, 'no absolute or protocol-relative URL')
  assert.equal(SCRIPT.match(/\bfetch\(/g)?.length, 2, 'two fetch calls: api() and readiness()')
  for (const m of SCRIPT.matchAll(/\bfetch\(([^,]+),/g)) assert.match(m[1]!, /^(path|'\/readyz')$/, m[0])
  assert.equal(SCRIPT.match(/credentials: 'omit'/g)?.length, 2, 'no cookie is sent')
})

test('the token lives in sessionStorage only and travels as a bearer header', () => {
  assert.doesNotMatch(SCRIPT, /localStorage|document\.cookie|indexedDB/)
  assert.match(SCRIPT, /headers: \{ authorization: 'Bearer ' \+ token \}/)
  assert.match(SCRIPT, /if \(res\.status === 401\) throw new Unauthorized\(REFUSED\)/, 'a 401 asks for the token again')
  assert.match(SCRIPT, /sessionStorage\.removeItem\(TOKEN\)/, 'a refused token is forgotten')
})

test('no string becomes markup or code', () => {
  assert.doesNotMatch(SCRIPT, /innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|setAttribute\('(style|on)/)
})

test("each reset sends the row's policy, rule and key unchanged, with DELETE", () => {
  assert.match(
    SCRIPT,
    /api\('\/v1\/admin\/counters\?' \+ new URLSearchParams\(\{ policy: e\.policy, rule: e\.rule, key: e\.key \}\), 'DELETE'\)/,
  )
})
