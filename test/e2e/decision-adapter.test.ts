/**
 * The nginx adapter for callers that cannot POST, run for real: the
 * installed nginx (one process, temp prefix) in front of the real gateway in
 * decision_service mode. Envoy and Traefik are not installed, so the test
 * sends exactly what each of them sends to its auth server: Envoy ext_authz
 * (HTTP service, `path_prefix: /_fairvisor`) calls with the client's own
 * method, path and query and the allowed client headers; Traefik ForwardAuth
 * calls `GET <address>` with X-Forwarded-Method/-Uri/-Host/-For. Skipped
 * loudly where nginx is not installed.
 */
import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { request, type IncomingHttpHeaders } from 'node:http'
import { createServer, type AddressInfo, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { freePort, startGateway, type GatewayProcess } from '../helpers/processes.js'
import { nginxConf, docsNginxBlock } from '../helpers/nginx.js'

const HAVE_NGINX = spawnSync('nginx', ['-v']).error === undefined
if (!HAVE_NGINX)
  console.error(
    '\n\n*** nginx NOT INSTALLED: the nginx adapter (Envoy ext_authz / Traefik ForwardAuth) test is SKIPPED (apt-get install nginx) ***\n\n',
  )

/** The ```nginx block between the markers of docs/integrations.md. */
function docsSnippet(): string {
  const block = docsNginxBlock('nginx-adapter')
  assert.ok(block, 'docs/integrations.md has the nginx adapter block between its markers')
  return block
}

interface Answer {
  status: number
  headers: IncomingHttpHeaders
  body: string
}

/** One call with exactly these headers (node:http, so Host can be set as Envoy sets it). */
function call(port: number, method: string, path: string, headers: Record<string, string>, body?: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method, path, headers, agent: false, timeout: 3000 }, (res) => {
      let text = ''
      res.setEncoding('utf8')
      res.on('data', (c: string) => (text += c))
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: text }))
    })
    req.on('timeout', () => req.destroy(new Error(`${method} ${path}: no answer within 3 s`)))
    req.on('error', reject)
    req.end(body)
  })
}

const tb = (burst: number) => ({ algorithm: 'token_bucket', algorithm_config: { tokens_per_second: 0.01, burst } })
const BUNDLE = {
  bundle_version: 1,
  policies: [
    // pathExact: matches only if the adapter hands over the path with its query split off.
    {
      id: 'items',
      spec: { selector: { pathExact: '/api/items' }, rules: [{ name: 'per_user', limit_keys: ['header:x-user'], ...tb(2) }] },
    },
    // Only POST: proves the client's method (not the adapter's POST) reached the engine.
    {
      id: 'writes',
      spec: {
        selector: { pathExact: '/api/orders', methods: ['POST'] },
        rules: [{ name: 'per_user', limit_keys: ['header:x-user'], ...tb(5) }],
      },
    },
    // Host-scoped: proves the client's host reached the engine.
    {
      id: 'shop',
      spec: {
        selector: { pathPrefix: '/cart', hosts: ['shop.example'] },
        rules: [{ name: 'per_user', limit_keys: ['header:x-user'], ...tb(5) }],
      },
    },
    // ip:address: the client address must come from X-Forwarded-For (the peer is always nginx).
    { id: 'login', spec: { selector: { pathExact: '/login' }, rules: [{ name: 'per_ip', limit_keys: ['ip:address'], ...tb(1) }] } },
  ],
}

/** The RateLimit header's policy name, or undefined when no policy applied. */
const policyOf = (a: Answer): string | undefined => /^"([^"]+)"/.exec(String(a.headers.ratelimit ?? ''))?.[1]

function assertAllowed(a: Answer, policy: string, remaining: number, limit: number, ctx: string): void {
  assert.equal(a.status, 200, `${ctx}: ${a.status} ${a.body}`)
  assert.equal(policyOf(a), policy, ctx)
  assert.equal(a.headers['ratelimit-limit'], String(limit), ctx)
  assert.equal(a.headers['ratelimit-remaining'], String(remaining), ctx)
  assert.match(String(a.headers['ratelimit-policy']), new RegExp(`^"${policy}";q=${limit};w=\\d+$`), ctx)
}

function assertRejected(a: Answer, policy: string, limit: number, ctx: string): void {
  assert.equal(a.status, 429, `${ctx}: ${a.status} ${a.body}`)
  assert.match(String(a.headers['retry-after']), /^\d+$/, ctx)
  const body = JSON.parse(a.body) as { error: string; retry_after: number }
  assert.equal(body.error, 'too_many_requests', ctx)
  assert.equal(String(body.retry_after), a.headers['retry-after'], ctx)
  assert.ok(Number(a.headers['retry-after']) >= 50, `${ctx}: Retry-After ${a.headers['retry-after']}`)
  assert.equal(a.headers['x-fairvisor-reason'], 'token_bucket_exceeded', ctx)
  assert.equal(policyOf(a), policy, ctx)
  assert.equal(a.headers['ratelimit-limit'], String(limit), ctx)
  assert.equal(a.headers['ratelimit-remaining'], '0', ctx)
}

interface Nginx {
  port: number
  stop(): Promise<void>
}

/** The docs/integrations.md block, with its listen address and the sidecar's address replaced, in a one-process nginx. */
async function startAdapter(upstreamPort: number): Promise<Nginx> {
  const dir = mkdtempSync(join(tmpdir(), 'fv-adapter-'))
  const port = await freePort()
  const block = docsSnippet()
  assert.equal(block.split('127.0.0.1:8080').length - 1, 2, 'the block names the sidecar twice')
  assert.equal(block.split('listen 127.0.0.1:8081;').length - 1, 1, 'the block listens on 127.0.0.1:8081')
  const server = block
    .replaceAll('127.0.0.1:8080', `127.0.0.1:${upstreamPort}`)
    .replace('listen 127.0.0.1:8081;', `listen 127.0.0.1:${port};`)
  const conf = nginxConf(dir, server)
  writeFileSync(join(dir, 'nginx.conf'), conf)
  const check = spawnSync('nginx', ['-t', '-p', dir, '-c', join(dir, 'nginx.conf')], { encoding: 'utf8' })
  if (check.status !== 0) rmSync(dir, { recursive: true, force: true })
  assert.equal(check.status, 0, `nginx -t: ${check.stderr}`)
  const proc = spawn('nginx', ['-p', dir, '-c', join(dir, 'nginx.conf')], { stdio: ['ignore', 'ignore', 'inherit'] })
  // Never leave nginx behind, even if the test process dies without running after().
  const kill = (): void => void proc.kill('SIGKILL')
  process.once('exit', kill)
  const stop = async (): Promise<void> => {
    if (proc.exitCode === null && proc.signalCode === null) {
      const exited = new Promise((r) => proc.once('exit', r))
      proc.kill('SIGQUIT')
      await Promise.race([exited, sleep(3000).then(kill)])
    }
    process.removeListener('exit', kill)
    rmSync(dir, { recursive: true, force: true })
  }
  // Ready when nginx answers on an unrelated path (its own 404).
  for (let i = 0; ; i++) {
    try {
      await call(port, 'GET', '/ready', {})
      return { port, stop }
    } catch (e) {
      if (i === 50 || proc.exitCode !== null) {
        const log = readFileSync(join(dir, 'error.log'), 'utf8')
        await stop()
        throw new Error(`nginx did not start: ${String(e)}; ${log}`)
      }
      await sleep(100)
    }
  }
}

describe('nginx adapter for Envoy ext_authz and Traefik ForwardAuth (docs/integrations.md block)', { skip: !HAVE_NGINX }, () => {
  let gw: GatewayProcess | undefined
  let nginx: Nginx | undefined
  let port = 0
  let dir = ''

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'fv-adapter-'))
    writeFileSync(join(dir, 'bundle.json'), JSON.stringify(BUNDLE))
    // The adapter is the sidecar's peer: trusting it makes ip:address come from X-Forwarded-For.
    gw = await startGateway({
      FAIRVISOR_MODE: 'decision_service',
      FAIRVISOR_CONFIG_FILE: join(dir, 'bundle.json'),
      FAIRVISOR_TRUSTED_PROXIES: '127.0.0.1',
    })
    nginx = await startAdapter(gw.port)
    port = nginx.port
  })

  after(async () => {
    await nginx?.stop()
    await gw?.stop()
    if (dir) rmSync(dir, { recursive: true, force: true })
  })

  describe('Envoy ext_authz: client method and path under path_prefix /_fairvisor', () => {
    // Envoy's check request: the client's method and :authority, path_prefix + path + query,
    // the allowed_headers (here the limit key and X-Forwarded-For), Content-Length of the
    // (unbuffered, so empty) body.
    const envoy = (method: string, pathAndQuery: string, headers: Record<string, string>) =>
      call(port, method, `/_fairvisor${pathAndQuery}`, {
        host: 'api.example',
        'content-length': '0',
        'x-forwarded-for': '192.0.2.10',
        ...headers,
      })

    test('under the limit: 200 with RateLimit-*; the query is split off before pathExact', async () => {
      assertAllowed(await envoy('GET', '/api/items?page=2', { 'x-user': 'ann' }), 'items', 1, 2, 'GET ?page=2')
      assertAllowed(await envoy('POST', '/api/items?page=3&x=/y', { 'x-user': 'ann' }), 'items', 0, 2, 'POST ?page=3')
    })

    test('burst spent: 429 with Retry-After, X-Fairvisor-Reason and RateLimit-*; other keys unaffected', async () => {
      assertRejected(await envoy('GET', '/api/items?page=4', { 'x-user': 'ann' }), 'items', 2, 'third call')
      assertAllowed(await envoy('GET', '/api/items', { 'x-user': 'bob' }), 'items', 1, 2, 'other user')
      // The path is the client's, whole: a longer path is not /api/items.
      const other = await envoy('GET', '/api/items/7', { 'x-user': 'ann' })
      assert.equal(other.status, 200)
      assert.equal(other.headers.ratelimit, undefined)
    })

    test("the client's method reaches the engine, not the adapter's POST", async () => {
      assertAllowed(await envoy('POST', '/api/orders', { 'x-user': 'cy' }), 'writes', 4, 5, 'POST /api/orders')
      const get = await envoy('GET', '/api/orders', { 'x-user': 'cy' })
      assert.equal(get.status, 200)
      assert.equal(get.headers.ratelimit, undefined, 'a GET is not matched by the POST-only policy')
    })

    test("the client's host reaches the engine", async () => {
      assertAllowed(await envoy('GET', '/cart/checkout', { host: 'shop.example', 'x-user': 'di' }), 'shop', 4, 5, 'shop.example')
      const elsewhere = await envoy('GET', '/cart/checkout', { host: 'other.example', 'x-user': 'di' })
      assert.equal(elsewhere.status, 200)
      assert.equal(elsewhere.headers.ratelimit, undefined, 'other host: no policy')
    })

    test('a check request that carries a body is decided like any other', async () => {
      // with_request_body makes Envoy send (part of) the client's body with its length.
      const body = 'x'.repeat(2048)
      const a = await call(
        port,
        'POST',
        '/_fairvisor/api/orders?via=body',
        {
          host: 'api.example',
          'x-user': 'eve',
          'x-forwarded-for': '192.0.2.10',
          'content-type': 'text/plain',
          'content-length': String(body.length),
        },
        body,
      )
      assertAllowed(a, 'writes', 4, 5, 'POST with body')
      assertAllowed(await envoy('POST', '/api/orders', { 'x-user': 'eve' }), 'writes', 3, 5, 'next call')
    })

    test('ip:address is the X-Forwarded-For client: two clients, two buckets', async () => {
      assertAllowed(await envoy('GET', '/login?next=/home', { 'x-forwarded-for': '203.0.113.7' }), 'login', 0, 1, 'first client')
      assertRejected(await envoy('GET', '/login', { 'x-forwarded-for': '203.0.113.7' }), 'login', 1, 'first client again')
      assertAllowed(await envoy('GET', '/login', { 'x-forwarded-for': '203.0.113.8' }), 'login', 0, 1, 'second client')
    })
  })

  describe('Traefik ForwardAuth: GET /_traefik with X-Forwarded-*', () => {
    // Traefik's auth request: GET to the address, the client's headers copied, and
    // X-Forwarded-Method/-Proto/-Host/-Uri/-For describing the original request.
    const traefik = (method: string, uri: string, host: string, headers: Record<string, string>) =>
      call(port, 'GET', '/_traefik', {
        host: '127.0.0.1:8081',
        'x-forwarded-method': method,
        'x-forwarded-proto': 'https',
        'x-forwarded-host': host,
        'x-forwarded-uri': uri,
        'x-forwarded-for': '192.0.2.20',
        ...headers,
      })

    test('under the limit 200, then 429 with Retry-After, X-Fairvisor-Reason and RateLimit-*; query split off', async () => {
      assertAllowed(await traefik('GET', '/api/items?page=2', 'api.example', { 'x-user': 'tom' }), 'items', 1, 2, 'first')
      assertAllowed(await traefik('GET', '/api/items?page=3', 'api.example', { 'x-user': 'tom' }), 'items', 0, 2, 'second')
      assertRejected(await traefik('GET', '/api/items?page=4', 'api.example', { 'x-user': 'tom' }), 'items', 2, 'third')
      assertAllowed(await traefik('GET', '/api/items', 'api.example', { 'x-user': 'uma' }), 'items', 1, 2, 'other user')
    })

    test('X-Forwarded-Host scopes host policies; X-Forwarded-Method reaches the engine', async () => {
      assertAllowed(await traefik('GET', '/cart/checkout?step=1', 'shop.example', { 'x-user': 'vi' }), 'shop', 4, 5, 'shop.example')
      const elsewhere = await traefik('GET', '/cart/checkout?step=1', 'other.example', { 'x-user': 'vi' })
      assert.equal(elsewhere.status, 200)
      assert.equal(elsewhere.headers.ratelimit, undefined, 'other host: no policy')
      assertAllowed(await traefik('POST', '/api/orders?id=9', 'api.example', { 'x-user': 'wu' }), 'writes', 4, 5, 'POST')
      const get = await traefik('GET', '/api/orders?id=9', 'api.example', { 'x-user': 'wu' })
      assert.equal(get.headers.ratelimit, undefined, 'a GET is not matched by the POST-only policy')
    })

    test('ip:address is the X-Forwarded-For client: two clients, two buckets', async () => {
      assertAllowed(await traefik('GET', '/login', 'api.example', { 'x-forwarded-for': '198.51.100.1' }), 'login', 0, 1, 'first client')
      assertRejected(await traefik('GET', '/login', 'api.example', { 'x-forwarded-for': '198.51.100.1' }), 'login', 1, 'first client again')
      assertAllowed(await traefik('GET', '/login', 'api.example', { 'x-forwarded-for': '198.51.100.2' }), 'login', 0, 1, 'second client')
    })
  })

  test('with the sidecar stopped, the adapter answers 502 on both routes', async () => {
    await gw!.stop()
    assert.equal((await call(port, 'GET', '/_fairvisor/api/items', { 'x-user': 'zed' })).status, 502)
    assert.equal((await call(port, 'GET', '/_traefik', { 'x-forwarded-uri': '/api/items', 'x-user': 'zed' })).status, 502)
  })
})

interface Seen {
  head: string
  headers: Map<string, string>
  bodyBytes: number
}

/**
 * What nginx sends upstream, byte for byte: a TCP server in place of the
 * sidecar that keeps each request's head and counts the bytes after it (the
 * gateway answers without waiting for a body, so it cannot show a stray
 * Content-Length or body; this does).
 */
describe('the adapter sends the sidecar a bodiless POST /v1/decision (wire check)', { skip: !HAVE_NGINX }, () => {
  const seen: Seen[] = []
  const sockets = new Set<Socket>()
  const recorder = createServer((sock) => {
    sockets.add(sock)
    sock.on('close', () => sockets.delete(sock))
    let buf = Buffer.alloc(0)
    let answered = false
    sock.on('data', (c: Buffer) => {
      buf = Buffer.concat([buf, c])
      const end = buf.indexOf('\r\n\r\n')
      if (end === -1 || answered) return
      answered = true
      // Give a body, if nginx sends one, time to arrive before answering.
      setTimeout(() => {
        const [head, ...lines] = buf.subarray(0, end).toString('latin1').split('\r\n')
        const headers = new Map<string, string>()
        for (const l of lines) headers.set(l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim())
        seen.push({ head: head!, headers, bodyBytes: buf.length - end - 4 })
        sock.end('HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n')
      }, 100)
    })
  })
  let nginx: Nginx | undefined

  before(async () => {
    await new Promise<void>((r) => recorder.listen(0, '127.0.0.1', r))
    nginx = await startAdapter((recorder.address() as AddressInfo).port)
  })
  after(async () => {
    await nginx?.stop()
    for (const s of sockets) s.destroy()
    await new Promise<void>((r) => recorder.close(() => r()))
  })

  test('Envoy: a check request with a body becomes POST /v1/decision with the X-Original-* headers, no body, no Content-Length', async () => {
    seen.length = 0
    const body = 'x'.repeat(2048)
    const a = await call(
      nginx!.port,
      'POST',
      '/_fairvisor/api/orders?a=1&b=/c',
      { host: 'api.example', 'x-user': 'eve', 'x-forwarded-for': '192.0.2.10', 'content-length': String(body.length) },
      body,
    )
    assert.equal(a.status, 200)
    assert.equal(seen.length, 1)
    const s = seen[0]!
    assert.match(s.head, /^POST \/v1\/decision HTTP\/1\.[01]$/)
    assert.equal(s.headers.get('x-original-method'), 'POST')
    assert.equal(s.headers.get('x-original-uri'), '/api/orders?a=1&b=/c')
    assert.equal(s.headers.get('x-original-host'), 'api.example')
    assert.equal(s.headers.get('x-forwarded-for'), '192.0.2.10')
    assert.equal(s.headers.get('x-user'), 'eve')
    assert.equal(s.headers.get('content-length'), undefined, 'no Content-Length for a body that is not sent')
    assert.equal(s.bodyBytes, 0)
  })

  test('Envoy: the client path "/" (path_prefix + "/") is X-Original-URI "/"', async () => {
    seen.length = 0
    assert.equal((await call(nginx!.port, 'GET', '/_fairvisor/?q=1', { host: 'api.example' })).status, 200)
    assert.equal(seen[0]?.headers.get('x-original-uri'), '/?q=1')
    assert.equal(seen[0]?.headers.get('x-original-method'), 'GET')
  })

  test('Traefik: GET /_traefik becomes POST /v1/decision with X-Original-* taken from X-Forwarded-*', async () => {
    seen.length = 0
    const a = await call(nginx!.port, 'GET', '/_traefik', {
      host: '127.0.0.1:8081',
      'x-forwarded-method': 'DELETE',
      'x-forwarded-uri': '/api/orders/9?force=1',
      'x-forwarded-host': 'shop.example',
      'x-forwarded-for': '192.0.2.20',
      'x-user': 'wu',
    })
    assert.equal(a.status, 200)
    const s = seen[0]!
    assert.match(s.head, /^POST \/v1\/decision HTTP\/1\.[01]$/)
    assert.equal(s.headers.get('x-original-method'), 'DELETE')
    assert.equal(s.headers.get('x-original-uri'), '/api/orders/9?force=1')
    assert.equal(s.headers.get('x-original-host'), 'shop.example')
    assert.equal(s.headers.get('x-forwarded-for'), '192.0.2.20')
    assert.equal(s.headers.get('x-user'), 'wu')
    assert.equal(s.headers.get('content-length'), undefined)
    assert.equal(s.bodyBytes, 0)
  })
})
