/**
 * Traefik ForwardAuth and Envoy's HTTP ext_authz, neither installed on this machine, against the
 * real gateway in decision_service mode. Their blocks in docs/integrations.md are read, and the
 * gateway gets exactly the calls each proxy builds from them: Traefik's (GET to `address`, the
 * client's headers copied, X-Forwarded-For/-Method/-Proto/-Host/-Uri set, as its forwardAuth
 * writeHeader does) and Envoy's (the client's method, `path_prefix` + the client's path, the
 * client's Host, Content-Length 0, only the allowed headers). What each would hand the client is
 * what its own header lists select from the gateway's answer.
 */
import assert from 'node:assert/strict'
import { type IncomingHttpHeaders, request } from 'node:http'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { parse } from 'yaml'
import { docsBlock } from '../helpers/docs-blocks.js'
import { startGateway, type GatewayProcess } from '../helpers/processes.js'

interface Answer {
  status: number
  headers: IncomingHttpHeaders
  body: string
}

/** One call with exactly these header lines, in this order (flat [name, value, …]). */
function call(port: number, method: string, path: string, headers: string[]): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method, path, headers, agent: false, setHost: false }, (res) => {
      let text = ''
      res.setEncoding('utf8')
      res.on('data', (c: string) => (text += c))
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: text }))
    })
    req.on('error', reject)
    req.end()
  })
}

const tb = (burst: number) => ({ algorithm: 'token_bucket', algorithm_config: { tokens_per_second: 0.01, burst } })
// Rule names differ: a counter is named by its rule, so two policies' rules of one name share it.
const perKey = (name: string, burst: number) => [{ name, limit_keys: ['header:x-api-key'], ...tb(burst) }]
const BUNDLE = {
  bundle_version: 1,
  policies: [
    { id: 'items', spec: { selector: { pathExact: '/api/items' }, rules: perKey('items_key', 2) } },
    { id: 'writes', spec: { selector: { pathExact: '/api/orders', methods: ['POST'] }, rules: perKey('writes_key', 5) } },
    { id: 'shop', spec: { selector: { pathPrefix: '/cart', hosts: ['shop.example'] }, rules: perKey('shop_key', 5) } },
    { id: 'login', spec: { selector: { pathExact: '/login' }, rules: [{ name: 'per_ip', limit_keys: ['ip:address'], ...tb(1) }] } },
  ],
}

/** Every RateLimit header the gateway sends with a limit (engine/headers.ts), lower case. */
const RATELIMIT = ['ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset', 'ratelimit', 'ratelimit-policy']

function block(marker: string): Record<string, unknown> {
  const text = docsBlock(marker, 'yaml')
  assert.ok(text, `docs/integrations.md has the ${marker} block between its markers`)
  return parse(text) as Record<string, unknown>
}

/** What a client is shown of an answer through a proxy that passes `pass` of its headers (names lower case). */
const shown = (a: Answer, pass: (name: string) => boolean): string[] => Object.keys(a.headers).filter(pass).sort()

describe('Traefik ForwardAuth and Envoy ext_authz over HTTP (docs/integrations.md blocks) against the gateway', () => {
  let gw: GatewayProcess | undefined
  let dir = ''
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'fv-forward-auth-'))
    writeFileSync(join(dir, 'bundle.json'), JSON.stringify(BUNDLE))
    // The proxy is the gateway's peer: trusting it makes ip:address come from its X-Forwarded-For.
    gw = await startGateway({
      FAIRVISOR_MODE: 'decision_service',
      FAIRVISOR_CONFIG_FILE: join(dir, 'bundle.json'),
      FAIRVISOR_TRUSTED_PROXIES: '127.0.0.1',
    })
  })
  after(async () => {
    await gw?.stop()
    if (dir) rmSync(dir, { recursive: true, force: true })
  })

  describe('Traefik: GET <address>, the client headers copied, X-Forwarded-* set by Traefik', () => {
    const fa = (block('traefik') as { http: { middlewares: { fairvisor: { forwardAuth: Record<string, unknown> } } } }).http.middlewares
      .fairvisor.forwardAuth
    const address = new URL(String(fa.address))
    const copied = (fa.authResponseHeaders as string[]).map((h) => h.toLowerCase())
    /** Traefik's call for a client request (trustForwardHeader off: Traefik's own X-Forwarded-* replace the client's). */
    const traefik = (method: string, uri: string, host: string, client: [string, string][], remote = '192.0.2.20') => {
      const own = new Set(['x-forwarded-for', 'x-forwarded-method', 'x-forwarded-proto', 'x-forwarded-host', 'x-forwarded-uri'])
      const headers = [
        ...client.filter(([k]) => !own.has(k.toLowerCase())).flat(),
        ...['X-Forwarded-For', remote, 'X-Forwarded-Method', method, 'X-Forwarded-Proto', 'http'],
        ...['X-Forwarded-Host', host, 'X-Forwarded-Uri', uri, 'Accept-Encoding', 'gzip'],
      ]
      // Go's client sends the address's host as Host.
      return call(gw!.port, 'GET', address.pathname + address.search, ['Host', address.host, ...headers])
    }

    test('the block: address /v1/decision, Traefik sets X-Forwarded-* itself, the RateLimit-* headers named', async () => {
      assert.equal(address.pathname, '/v1/decision')
      assert.equal(address.host, '127.0.0.1:8080')
      assert.notEqual(fa.trustForwardHeader, true, "trustForwardHeader would pass a client's own X-Forwarded-Uri")
      assert.deepEqual([...copied].sort(), [...RATELIMIT].sort())
    })

    test('under the limit: 200 with every header authResponseHeaders copies; then a 429 as Traefik passes it on', async () => {
      const first = await traefik('GET', '/api/items?page=2', 'api.example', [['X-Api-Key', 'tom']])
      assert.equal(first.status, 200, first.body)
      assert.deepEqual(
        shown(first, (h) => copied.includes(h)),
        [...RATELIMIT].sort(),
      )
      assert.equal(first.headers['ratelimit-remaining'], '1')
      assert.equal((await traefik('GET', '/api/items?page=3', 'api.example', [['X-Api-Key', 'tom']])).status, 200)
      // A non-2xx answer goes to the client with all its headers and its body.
      const third = await traefik('GET', '/api/items', 'api.example', [['X-Api-Key', 'tom']])
      assert.equal(third.status, 429)
      assert.match(String(third.headers['retry-after']), /^\d+$/)
      assert.equal(third.headers['x-fairvisor-reason'], 'token_bucket_exceeded')
      assert.equal(third.headers['ratelimit-remaining'], '0')
      assert.equal(JSON.parse(third.body).error, 'too_many_requests')
      assert.equal((await traefik('GET', '/api/items', 'api.example', [['X-Api-Key', 'uma']])).status, 200, 'another key')
    })

    test("X-Forwarded-Method and X-Forwarded-Host carry the client's method and host", async () => {
      const post = await traefik('POST', '/api/orders?id=9', 'api.example', [['X-Api-Key', 'vi']])
      assert.equal(post.headers['ratelimit-remaining'], '4')
      assert.equal((await traefik('GET', '/api/orders', 'api.example', [['X-Api-Key', 'vi']])).headers.ratelimit, undefined)
      assert.equal((await traefik('GET', '/cart/x', 'shop.example:443', [['X-Api-Key', 'vi']])).headers['ratelimit-remaining'], '4')
      assert.equal((await traefik('GET', '/cart/x', 'other.example', [['X-Api-Key', 'vi']])).headers.ratelimit, undefined)
    })

    test('ip:address is the client Traefik saw: two clients, two buckets', async () => {
      assert.equal((await traefik('GET', '/login', 'api.example', [], '198.51.100.1')).status, 200)
      assert.equal((await traefik('GET', '/login', 'api.example', [], '198.51.100.1')).status, 429)
      assert.equal((await traefik('GET', '/login', 'api.example', [], '198.51.100.2')).status, 200)
    })

    test('a client adding X-Original-* of its own (Traefik copies it) is refused 400, not believed', async () => {
      for (const extra of [
        ['X-Original-URI', '/free'],
        ['X-Original-Host', 'other.example'],
        ['X-Original-Method', 'OPTIONS'],
      ] as [string, string][]) {
        const a = await traefik('POST', '/api/orders', 'api.example', [['X-Api-Key', 'wu'], extra])
        assert.equal(a.status, 400, extra[0])
        assert.equal(a.headers['x-fairvisor-reason'], 'ambiguous_request')
      }
      assert.equal(
        (await traefik('POST', '/api/orders', 'api.example', [['X-Api-Key', 'wu']])).headers['ratelimit-remaining'],
        '4',
        'nothing charged',
      )
    })
  })

  describe('Envoy ext_authz: the client method, path_prefix + the client path, the client Host', () => {
    interface Patterns {
      patterns: { exact?: string; prefix?: string; suffix?: string; contains?: string }[]
    }
    const filters = block('envoy-http').http_filters as { name: string; typed_config: Record<string, unknown> }[]
    const authz = filters.find((f) => f.name === 'envoy.filters.http.ext_authz')!.typed_config
    const service = authz.http_service as {
      path_prefix: string
      authorization_response: { allowed_client_headers_on_success: Patterns; allowed_client_headers: Patterns }
    }
    const matcher =
      (list: Patterns | undefined, always: string[]) =>
      (name: string): boolean =>
        always.includes(name) ||
        (list?.patterns ?? []).some(
          (p) =>
            name === p.exact ||
            (p.prefix !== undefined && name.startsWith(p.prefix)) ||
            (p.suffix !== undefined && name.endsWith(p.suffix)) ||
            (p.contains !== undefined && name.includes(p.contains)),
        )
    // Envoy always sends these (ext_authz_http_impl.cc) and always passes a denied answer's status line and length.
    const sent = matcher(authz.allowed_headers as Patterns, ['authorization'])
    const onSuccess = matcher(service.authorization_response.allowed_client_headers_on_success, [])
    const onDenied = matcher(service.authorization_response.allowed_client_headers, ['content-length', 'www-authenticate', 'location'])
    /** Envoy's check request for a client request: only the allowed headers, each line apart (encode_raw_headers). */
    const envoy = (method: string, pathAndQuery: string, host: string, client: [string, string][]) =>
      call(gw!.port, method, service.path_prefix + pathAndQuery, [
        'Host',
        host,
        'Content-Length',
        '0',
        ...client.filter(([k]) => sent(k.toLowerCase())).flat(),
      ])

    test('the block: path_prefix /v1/decision, raw headers, X-Forwarded-For and the limit key sent', () => {
      assert.equal(service.path_prefix, '/v1/decision')
      assert.equal(authz.encode_raw_headers, true)
      assert.ok(sent('x-forwarded-for') && sent('x-api-key') && sent('cookie'))
    })

    test('allow: 200, and exactly the RateLimit-* headers reach the client; the query is split off before pathExact', async () => {
      const a = await envoy('GET', '/api/items?page=2', 'api.example', [
        ['X-Api-Key', 'ann'],
        ['X-Forwarded-For', '192.0.2.10'],
      ])
      assert.equal(a.status, 200, a.body)
      assert.deepEqual(shown(a, onSuccess), [...RATELIMIT].sort())
      assert.equal(a.headers['ratelimit-remaining'], '1')
    })

    test('reject: 429 with Retry-After, RateLimit-*, the reason and the body type at the client', async () => {
      await envoy('GET', '/api/items', 'api.example', [['X-Api-Key', 'ann']])
      const a = await envoy('GET', '/api/items', 'api.example', [['X-Api-Key', 'ann']])
      assert.equal(a.status, 429)
      assert.deepEqual(shown(a, onDenied), ['content-length', 'content-type', 'retry-after', 'x-fairvisor-reason', ...RATELIMIT].sort())
      assert.equal(JSON.parse(a.body).error, 'too_many_requests')
    })

    test("the client's method and host reach the engine", async () => {
      assert.equal((await envoy('POST', '/api/orders', 'api.example', [['X-Api-Key', 'cy']])).headers['ratelimit-remaining'], '4')
      assert.equal((await envoy('GET', '/api/orders', 'api.example', [['X-Api-Key', 'cy']])).headers.ratelimit, undefined)
      assert.equal((await envoy('DELETE', '/cart/1', 'shop.example', [['X-Api-Key', 'cy']])).headers['ratelimit-remaining'], '4')
      assert.equal((await envoy('DELETE', '/cart/1', 'other.example', [['X-Api-Key', 'cy']])).headers.ratelimit, undefined)
    })

    test('ip:address from X-Forwarded-For; a repeated limit-key header with two values is 400', async () => {
      assert.equal((await envoy('GET', '/login', 'api.example', [['X-Forwarded-For', '203.0.113.7']])).status, 200)
      assert.equal((await envoy('GET', '/login', 'api.example', [['X-Forwarded-For', '203.0.113.7']])).status, 429)
      assert.equal((await envoy('GET', '/login', 'api.example', [['X-Forwarded-For', '203.0.113.8']])).status, 200)
      const twice = await envoy('GET', '/api/items', 'api.example', [
        ['X-Api-Key', 'dee'],
        ['X-Api-Key', 'eve'],
      ])
      assert.equal(twice.status, 400)
      assert.ok(onDenied('x-fairvisor-reason'))
      assert.equal(twice.headers['x-fairvisor-reason'], 'ambiguous_request')
    })
  })
})
