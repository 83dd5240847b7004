/**
 * Caddy's forward_auth, run for real: the Caddyfile block of docs/integrations.md in the installed
 * Caddy, in front of a real backend, asking the real gateway in decision_service mode. Caddy calls
 * `GET /v1/decision` with X-Forwarded-Method/-Uri/-Host; the test proves that an allowed request's
 * RateLimit-* headers reach the client (copy_headers onto the request, the `header` directive onto
 * the answer), that a 429 reaches it with Retry-After, and that nothing is made up where no limit
 * applies. Skipped loudly where Caddy is not installed (apt-get install caddy).
 */
import assert from 'node:assert/strict'
import type { IncomingHttpHeaders } from 'node:http'
import { request } from 'node:http'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { type CaddyProcess, HAVE_CADDY, startDocsCaddy } from '../helpers/caddy.js'
import { startBackend, startGateway, type Backend, type GatewayProcess } from '../helpers/processes.js'

if (!HAVE_CADDY) console.error('\n\n*** caddy NOT INSTALLED: the Caddy forward_auth test is SKIPPED (apt-get install caddy) ***\n\n')

const tb = (burst: number) => ({ algorithm: 'token_bucket', algorithm_config: { tokens_per_second: 0.01, burst } })
// Rule names differ: a counter is named by its rule, so two policies' rules of one name share it.
const perKey = (name: string, burst: number) => [{ name, limit_keys: ['header:x-api-key'], ...tb(burst) }]
const BUNDLE = {
  bundle_version: 1,
  policies: [
    // pathExact: matches only if Caddy's X-Forwarded-Uri is read with its query split off.
    { id: 'items', spec: { selector: { pathExact: '/api/items' }, rules: perKey('items_key', 2) } },
    // POST only: the client's method (X-Forwarded-Method), not Caddy's GET, reaches the engine.
    { id: 'writes', spec: { selector: { pathExact: '/api/orders', methods: ['POST'] }, rules: perKey('writes_key', 5) } },
    // Host-scoped: the client's host reaches the engine.
    { id: 'shop', spec: { selector: { pathPrefix: '/cart', hosts: ['shop.example'] }, rules: perKey('shop_key', 5) } },
  ],
}

interface Answer {
  status: number
  headers: IncomingHttpHeaders
  body: string
}

/** One request to Caddy with exactly these headers (node:http, so Host can be set). */
function call(port: number, method: string, path: string, headers: Record<string, string>): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method, path, headers, agent: false }, (res) => {
      let text = ''
      res.setEncoding('utf8')
      res.on('data', (c: string) => (text += c))
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: text }))
    })
    req.on('error', reject)
    req.end()
  })
}

const RATELIMIT = ['ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset', 'ratelimit', 'ratelimit-policy']

function assertAllowed(a: Answer, policy: string, remaining: number, limit: number, ctx: string): void {
  assert.equal(a.status, 200, `${ctx}: ${a.status} ${a.body}`)
  assert.equal(a.body, 'from the backend\n', ctx)
  assert.equal(a.headers['ratelimit-limit'], String(limit), ctx)
  assert.equal(a.headers['ratelimit-remaining'], String(remaining), ctx)
  assert.match(String(a.headers['ratelimit-reset']), /^\d+$/, ctx)
  assert.match(String(a.headers.ratelimit), new RegExp(`^"${policy}";r=${remaining};t=\\d+$`), ctx)
  assert.match(String(a.headers['ratelimit-policy']), new RegExp(`^"${policy}";q=${limit};w=\\d+$`), ctx)
}

describe('Caddy forward_auth (docs/integrations.md block) in front of a backend, asking the gateway', { skip: !HAVE_CADDY }, () => {
  let gw: GatewayProcess | undefined
  let backend: Backend | undefined
  let caddy: CaddyProcess | undefined
  let dir = ''
  /** The request headers of each request the backend received. */
  const seen: IncomingHttpHeaders[] = []
  const send = (method: string, path: string, headers: Record<string, string> = {}) =>
    call(caddy!.port, method, path, { host: 'api.example', ...headers })

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'fv-caddy-bundle-'))
    writeFileSync(join(dir, 'bundle.json'), JSON.stringify(BUNDLE))
    backend = await startBackend((req, res) => {
      seen.push(req.headers)
      res.end('from the backend\n')
    })
    // Caddy is the gateway's peer: trusting it makes ip:address the client's (Caddy's X-Forwarded-For).
    gw = await startGateway({
      FAIRVISOR_MODE: 'decision_service',
      FAIRVISOR_CONFIG_FILE: join(dir, 'bundle.json'),
      FAIRVISOR_TRUSTED_PROXIES: '127.0.0.1',
    })
    caddy = await startDocsCaddy(gw.port, backend.port)
  })

  after(async () => {
    await caddy?.stop()
    await gw?.stop()
    await backend?.close()
    if (dir) rmSync(dir, { recursive: true, force: true })
  })

  test('200s pass to the backend, with the RateLimit-* headers of the decision at the client', async () => {
    assertAllowed(await send('GET', '/api/items?page=2', { 'x-api-key': 'ann' }), 'items', 1, 2, 'first')
    assertAllowed(await send('GET', '/api/items?page=3', { 'x-api-key': 'ann' }), 'items', 0, 2, 'second')
    // copy_headers put them on the backend's request too.
    assert.equal(seen.at(-1)?.['ratelimit-remaining'], '0')
  })

  test('past the burst the 429 reaches the client with Retry-After, RateLimit-* and the reason; the backend is not called', async () => {
    const before = backend!.count
    const a = await send('GET', '/api/items', { 'x-api-key': 'ann' })
    assert.equal(a.status, 429, a.body)
    assert.match(String(a.headers['retry-after']), /^\d+$/)
    assert.ok(Number(a.headers['retry-after']) >= 50, `Retry-After ${a.headers['retry-after']}`)
    assert.equal(a.headers['x-fairvisor-reason'], 'token_bucket_exceeded')
    assert.equal(a.headers['ratelimit-remaining'], '0')
    assert.equal(a.headers['ratelimit-limit'], '2')
    assert.deepEqual(JSON.parse(a.body), {
      error: 'too_many_requests',
      reason: 'token_bucket_exceeded',
      retry_after: Number(a.headers['retry-after']),
    })
    assert.equal(backend!.count, before, 'a rejected request never reaches the backend')
    // Another key is not affected.
    assertAllowed(await send('GET', '/api/items', { 'x-api-key': 'bob' }), 'items', 1, 2, 'other key')
  })

  test("where no limit applies, no RateLimit-* at the client, not even the client's own", async () => {
    const own = Object.fromEntries(RATELIMIT.map((h) => [h, '77']))
    for (const path of ['/elsewhere', '/api/items/7']) {
      const a = await send('GET', path, { 'x-api-key': 'cy', ...own })
      assert.equal(a.status, 200, a.body)
      for (const h of RATELIMIT) assert.equal(a.headers[h], undefined, `${path}: ${h}`)
      // Caddy 2.6's copy_headers writes its placeholder text for a header the gateway did not send: never a number.
      for (const h of RATELIMIT) assert.notEqual(seen.at(-1)?.[h], '77', `${path}: the backend saw the client's own ${h}`)
    }
  })

  test("the client's method and host reach the engine (X-Forwarded-Method, X-Forwarded-Host)", async () => {
    assertAllowed(await send('POST', '/api/orders', { 'x-api-key': 'di' }), 'writes', 4, 5, 'POST')
    const get = await send('GET', '/api/orders', { 'x-api-key': 'di' })
    assert.equal(get.status, 200)
    assert.equal(get.headers['ratelimit-limit'], undefined, 'a GET is not matched by the POST-only policy')
    assertAllowed(await send('GET', '/cart/checkout', { host: 'shop.example', 'x-api-key': 'di' }), 'shop', 4, 5, 'shop.example')
    const other = await send('GET', '/cart/checkout', { host: 'other.example', 'x-api-key': 'di' })
    assert.equal(other.headers['ratelimit-limit'], undefined, 'another host: no policy')
  })

  test('a client adding X-Original-URI of its own (Caddy copies it onto the call) is refused 400, never believed', async () => {
    const a = await send('GET', '/api/items', { 'x-api-key': 'eve', 'x-original-uri': '/free' })
    assert.equal(a.status, 400, a.body)
    assert.equal(a.headers['x-fairvisor-reason'], 'ambiguous_request')
    // Naming the same request is no contradiction.
    assertAllowed(
      await send('GET', '/api/items', {
        'x-api-key': 'eve',
        'x-original-method': 'GET',
        'x-original-uri': '/api/items',
        'x-original-host': 'api.example',
      }),
      'items',
      1,
      2,
      'agreeing X-Original-*',
    )
  })

  test('with the gateway stopped, Caddy answers 502: closed', async () => {
    await gw!.stop()
    const before = backend!.count
    assert.equal((await send('GET', '/api/items', { 'x-api-key': 'fay' })).status, 502)
    assert.equal(backend!.count, before)
  })
})
