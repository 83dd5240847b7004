/**
 * The status page as served (admin/status-page.ts): one self-contained
 * document whose Content-Security-Policy allows its own style and script by
 * hash and nothing from elsewhere. The page at work, in a browser against a
 * real gateway, is test/e2e/status-page.test.ts.
 */
import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { after, before, test } from 'node:test'
import { CONTENT_SECURITY_POLICY, STATUS_PAGE, statusPage } from '../../../src/admin/status-page.js'

let server: Server
let url: string
before(async () => {
  server = createServer(statusPage)
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`
})
after(() => new Promise<void>((r) => server.close(() => r())))

const hash = (text: string) => `'sha256-${createHash('sha256').update(text, 'utf8').digest('base64')}'`

/** The policy's directives by name. */
function directives(csp: string): Map<string, string[]> {
  return new Map(
    csp.split(';').map((d) => {
      const [name, ...values] = d.trim().split(/\s+/)
      return [name!, values]
    }),
  )
}

test('GET / serves the page as UTF-8 HTML, not cached, with the security headers', async () => {
  const res = await fetch(url)
  assert.equal(res.status, 200)
  assert.equal(res.headers.get('content-type'), 'text/html; charset=utf-8')
  assert.equal(res.headers.get('cache-control'), 'no-store')
  assert.equal(res.headers.get('x-content-type-options'), 'nosniff')
  assert.equal(res.headers.get('referrer-policy'), 'no-referrer')
  assert.equal(res.headers.get('x-frame-options'), 'DENY')
  assert.equal(res.headers.get('content-security-policy'), CONTENT_SECURITY_POLICY)
  const body = await res.text()
  assert.equal(body, STATUS_PAGE)
  assert.equal(Number(res.headers.get('content-length')), Buffer.byteLength(body))
  assert.match(body, /^<!doctype html>\n<html lang="en">/)
})

test('the policy allows the one inline style and the one inline script by hash, connections to the same origin, nothing else', async () => {
  const res = await fetch(url)
  const body = await res.text()
  const styles = [...body.matchAll(/<style>([\s\S]*?)<\/style>/g)].map((m) => m[1]!)
  const scripts = [...body.matchAll(/<script>([\s\S]*?)<\/script>/g)].map((m) => m[1]!)
  assert.equal(styles.length, 1)
  assert.equal(scripts.length, 1)
  assert.equal(body.match(/<style/g)?.length, 1, 'no other style element')
  assert.equal(body.match(/<script/g)?.length, 1, 'no other script element')
  const d = directives(res.headers.get('content-security-policy')!)
  assert.deepEqual(d.get('default-src'), ["'none'"])
  assert.deepEqual(d.get('script-src'), [hash(scripts[0]!)], 'the hash of the script as served')
  assert.deepEqual(d.get('style-src'), [hash(styles[0]!)], 'the hash of the style as served')
  assert.deepEqual(d.get('connect-src'), ["'self'"])
  assert.deepEqual(d.get('img-src'), ['data:'])
  assert.deepEqual(d.get('form-action'), ["'none'"])
  assert.deepEqual(d.get('base-uri'), ["'none'"])
  assert.deepEqual(d.get('frame-ancestors'), ["'none'"])
  assert.deepEqual(d.get('require-trusted-types-for'), ["'script'"])
  for (const [name, values] of d) {
    for (const v of values) assert.doesNotMatch(v, /unsafe|\*|https?:|^'strict-dynamic'$/, `${name} ${v}`)
  }
})

test('the page names no other origin: no URL, no external reference, no inline handler or style attribute', () => {
  assert.doesNotMatch(STATUS_PAGE, /:\/\//, 'no absolute URL anywhere, not even a namespace name')
  assert.doesNotMatch(STATUS_PAGE, /["'(]\/\//, 'no protocol-relative URL')
  assert.doesNotMatch(STATUS_PAGE, /@import|url\(/i, 'the style loads nothing')
  const refs = [...STATUS_PAGE.matchAll(/\s(src|href|action|srcset|poster|data)\s*=\s*"([^"]*)"/gi)].map((m) => `${m[1]}=${m[2]}`)
  assert.deepEqual(refs, ['href=data:,'], 'the only reference: the empty favicon, so the browser asks for none')
  assert.doesNotMatch(STATUS_PAGE, /\son[a-z]+\s*=/i, 'no inline event handler (the policy would block it)')
  assert.doesNotMatch(STATUS_PAGE, /\sstyle\s*=/i, 'no style attribute (the policy would block it)')
})

test('HEAD / answers the headers alone; another method is 405 with Allow', async () => {
  const head = await fetch(url, { method: 'HEAD' })
  assert.equal(head.status, 200)
  assert.equal(head.headers.get('content-length'), String(Buffer.byteLength(STATUS_PAGE)))
  assert.equal(await head.text(), '')
  const post = await fetch(url, { method: 'POST', body: 'x' })
  assert.equal(post.status, 405)
  assert.equal(post.headers.get('allow'), 'GET, HEAD')
  assert.deepEqual(await post.json(), { error: { code: 'admin_method_not_allowed', message: 'POST is not allowed here; use GET, HEAD' } })
})
