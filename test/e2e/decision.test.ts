/**
 * Decision service (docs/behaviour.md §1) through the real gateway process in
 * decision_service mode: POST /v1/decision describes a request in
 * X-Original-* headers, as nginx auth_request or Kong sends it (the forward-auth
 * conventions: decision-forward-auth.test.ts, decision-caddy.test.ts).
 */
import assert from 'node:assert/strict'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { startGateway, type GatewayProcess } from '../helpers/processes.js'

const tb = (name: string, burst: number) => ({
  name,
  limit_keys: ['header:x-user'],
  algorithm: 'token_bucket',
  // A slow refill so nothing comes back during the test.
  algorithm_config: { tokens_per_second: 0.01, burst },
})

const BUNDLE = {
  bundle_version: 1,
  policies: [
    { id: 'api', spec: { selector: { pathPrefix: '/api/' }, rules: [tb('api_user', 3)] } },
    { id: 'exact', spec: { selector: { pathExact: '/exact' }, rules: [tb('exact_user', 2)] } },
    { id: 'hosted', spec: { selector: { pathPrefix: '/h/', hosts: ['api.example.com'] }, rules: [tb('hosted_user', 1)] } },
  ],
}

function writeBundle(doc: object): string {
  const file = join(mkdtempSync(join(tmpdir(), 'fv-decision-')), 'bundle.json')
  writeFileSync(file, JSON.stringify(doc))
  return file
}

function decide(
  gw: GatewayProcess,
  uri: string,
  headers: Record<string, string> = {},
  method = 'POST',
  path = '/v1/decision',
): Promise<Response> {
  return fetch(`${gw.url}${path}`, { method, headers: { 'x-original-method': 'GET', 'x-original-uri': uri, ...headers } })
}

describe('decision service', () => {
  let gw: GatewayProcess
  before(async () => {
    gw = await startGateway({ FAIRVISOR_MODE: 'decision_service', FAIRVISOR_CONFIG_FILE: writeBundle(BUNDLE) })
  })
  after(() => gw?.stop())

  test('allow: 200, empty body, RateLimit headers of the matched policy', async () => {
    const r = await decide(gw, '/api/items', { 'x-user': 'alice' })
    assert.equal(r.status, 200)
    assert.equal(await r.text(), '')
    assert.equal(r.headers.get('ratelimit-limit'), '3')
    assert.equal(r.headers.get('ratelimit-remaining'), '2')
    assert.match(r.headers.get('ratelimit') ?? '', /^"api";r=2;t=\d+$/)
    assert.equal(r.headers.get('x-fairvisor-reason'), null)
  })

  test('reject after the burst: 429 with Retry-After, RateLimit-Remaining 0 and the reason', async () => {
    for (let i = 0; i < 3; i++) assert.equal((await decide(gw, '/api/items', { 'x-user': 'bob' })).status, 200)
    const r = await decide(gw, '/api/items', { 'x-user': 'bob' })
    assert.equal(r.status, 429)
    assert.equal(r.headers.get('ratelimit-remaining'), '0')
    assert.equal(r.headers.get('x-fairvisor-reason'), 'token_bucket_exceeded')
    const retry = Number(r.headers.get('retry-after'))
    // Base is the wait for one token at 0.01/s (100 s) plus up to 50 % jitter.
    assert.ok(retry >= 100 && retry <= 150, `retry-after ${retry}`)
    // Another user is not affected.
    assert.equal((await decide(gw, '/api/items', { 'x-user': 'carol' })).status, 200)
  })

  test('a query string in X-Original-URI still matches pathExact', async () => {
    const first = await decide(gw, '/exact?page=2&sort=asc', { 'x-user': 'dave' })
    assert.equal(first.status, 200)
    assert.equal(first.headers.get('ratelimit-limit'), '2', 'the pathExact policy applied')
    assert.equal((await decide(gw, '/exact?page=3', { 'x-user': 'dave' })).status, 200)
    const third = await decide(gw, '/exact', { 'x-user': 'dave' })
    assert.equal(third.status, 429, 'with and without a query string, the same counter')
    // A different path is not the exact one.
    const other = await decide(gw, '/exact/more?page=1', { 'x-user': 'dave' })
    assert.equal(other.status, 200)
    assert.equal(other.headers.get('ratelimit-limit'), null)
  })

  test('an absolute X-Original-URI is reduced to its path and query', async () => {
    const r = await decide(gw, 'https://api.example.com/exact?x=1', { 'x-user': 'erin' })
    assert.equal(r.status, 200)
    assert.equal(r.headers.get('ratelimit-limit'), '2')
  })

  test('a missing limit-key header fails open: allowed, no RateLimit headers, counted', async () => {
    for (let i = 0; i < 6; i++) {
      const r = await decide(gw, '/api/items')
      assert.equal(r.status, 200)
      assert.equal(r.headers.get('ratelimit-limit'), null)
    }
    const metrics = await (await fetch(`${gw.url}/metrics`)).text()
    const line = metrics.split('\n').find((l) => l.startsWith('fairvisor_descriptor_missing_total{key="header:x-user"}'))
    assert.ok(line && Number(line.split(' ')[1]) >= 6, `descriptor_missing counter: ${line}`)
  })

  test('any method on /v1/decision is a decision call (forward-auth proxies call with GET, Envoy with the client method)', async () => {
    const seen: number[] = []
    for (const method of ['GET', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'HEAD']) {
      const r = await decide(gw, '/exact', { 'x-user': 'frank' }, method)
      seen.push(r.status)
      assert.equal(r.headers.get('allow'), null, method)
    }
    // Burst 2: the third call of any method is the first reject.
    assert.deepEqual(seen, [200, 200, 429, 429, 429, 429])
  })

  test('POST /decision (old alias) and unknown paths are 404', async () => {
    assert.equal((await decide(gw, '/api/items', { 'x-user': 'gina' }, 'POST', '/decision')).status, 404)
    assert.equal((await decide(gw, '/api/items', { 'x-user': 'gina' }, 'POST', '/v1/decisions')).status, 404)
    assert.equal((await decide(gw, '/api/items', { 'x-user': 'gina' }, 'GET', '/api/items')).status, 404)
    assert.equal((await decide(gw, '/api/items', { 'x-user': 'gina' }, 'GET', '/v1/decisionx/api/items')).status, 404)
  })

  test('a host-scoped policy is enforced for that X-Original-Host only', async () => {
    const hosted = { 'x-user': 'hank', 'x-original-host': 'api.example.com' }
    const ok = await decide(gw, '/h/x', hosted)
    assert.equal(ok.status, 200)
    assert.equal(ok.headers.get('ratelimit-limit'), '1')
    // Same host written with case, port and trailing dot: the same policy and counter.
    assert.equal((await decide(gw, '/h/x', { ...hosted, 'x-original-host': 'API.Example.com.:443' })).status, 429)
    for (let i = 0; i < 4; i++) {
      const other = await decide(gw, '/h/x', { ...hosted, 'x-original-host': 'www.example.com' })
      assert.equal(other.status, 200)
      assert.equal(other.headers.get('ratelimit-limit'), null)
    }
    // Without X-Original-Host the sidecar's own Host (127.0.0.1) is used: not the scoped host.
    assert.equal((await decide(gw, '/h/x', { 'x-user': 'hank' })).status, 200)
  })
})

describe('decision service without a bundle', () => {
  let gw: GatewayProcess
  before(async () => {
    gw = await startGateway({ FAIRVISOR_MODE: 'decision_service' })
  })
  after(() => gw?.stop())

  test('POST /v1/decision is 503 no_bundle_loaded and /readyz is 503 not_ready', async () => {
    const r = await decide(gw, '/api/items', { 'x-user': 'alice' })
    assert.equal(r.status, 503)
    assert.equal(r.headers.get('x-fairvisor-reason'), 'no_bundle_loaded')
    const ready = await fetch(`${gw.url}/readyz`)
    assert.equal(ready.status, 503)
    assert.deepEqual(
      { ...((await ready.json()) as object), store: undefined },
      { status: 'not_ready', reason: 'no_policy_loaded', store: undefined },
    )
    assert.equal((await fetch(`${gw.url}/livez`)).status, 200)
  })
})
