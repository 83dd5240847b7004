/**
 * Envoy ext_authz v3 over gRPC, through the real gateway process: a client
 * built from proto/ calls Check; the answer carries exactly what the HTTP
 * decision API sends for the same decision.
 */
import assert from 'node:assert/strict'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { status as Code } from '@grpc/grpc-js'
import { checkRequest, grpcClients, headerList, type GrpcClients } from '../helpers/grpc-client.js'
import { metricValue, startGateway, type GatewayProcess } from '../helpers/processes.js'

const tb = (name: string, burst: number) => ({
  name,
  limit_keys: ['header:x-user'],
  algorithm: 'token_bucket',
  algorithm_config: { tokens_per_second: 0.01, burst },
})
const BUNDLE = {
  bundle_version: 1,
  policies: [
    { id: 'api', spec: { selector: { pathPrefix: '/api/' }, rules: [tb('api_user', 2)] } },
    { id: 'trial', spec: { selector: { pathPrefix: '/trial/' }, mode: 'shadow', rules: [tb('trial_user', 1)] } },
  ],
}

/** The headers that matter for comparison (the transport's own dropped), lower-cased names. */
function comparable(flat: string[]): [string, string][] {
  const out: [string, string][] = []
  for (let i = 0; i < flat.length; i += 2)
    if (!['content-length', 'date', 'connection', 'keep-alive'].includes(flat[i]!.toLowerCase()))
      out.push([flat[i]!.toLowerCase(), flat[i + 1]!])
  return out.sort()
}

describe('ext_authz v3 Check over gRPC', () => {
  let gw: GatewayProcess
  let c: GrpcClients
  before(async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'fv-grpc-')), 'bundle.json')
    writeFileSync(file, JSON.stringify(BUNDLE))
    gw = await startGateway({ FAIRVISOR_MODE: 'decision_service', FAIRVISOR_CONFIG_FILE: file, FAIRVISOR_GRPC_PORT: '0' })
    const line = await gw.waitForLog((l) => typeof l.msg === 'string' && l.msg.startsWith('fairvisor listening'))
    c = grpcClients(line.grpcPort as number)
  })
  after(async () => {
    c?.close()
    await gw?.stop()
  })

  test('health: SERVING for the server, both services and envoyproxy/ratelimit\'s "ratelimit", SERVICE_UNKNOWN otherwise', async () => {
    assert.equal((await c.healthCheck()).status, 1)
    assert.equal((await c.healthCheck('envoy.service.auth.v3.Authorization')).status, 1)
    assert.equal((await c.healthCheck('ratelimit')).status, 1)
    assert.equal((await c.healthCheck('nope')).status, 3)
  })

  test('allow: OK with RateLimit-* in ok_response.response_headers_to_add, as the decision API', async () => {
    const r = await c.check(checkRequest({ path: '/api/items?x=1', headers: { 'x-user': 'alice' } }))
    assert.equal(r.status.code ?? 0, 0)
    assert.equal(r.http_response, 'ok_response')
    const http = await fetch(`${gw.url}/v1/decision`, {
      method: 'POST',
      headers: { 'x-original-method': 'GET', 'x-original-uri': '/api/items', 'x-user': 'alice2' },
    })
    assert.equal(http.status, 200)
    const got = comparable(headerList(r.ok_response.response_headers_to_add))
    assert.ok(
      got.some(([k, v]) => k === 'ratelimit-remaining' && v === '1'),
      JSON.stringify(got),
    )
    const httpHeaders = comparable([...http.headers].flat()).filter(([k]) => k.startsWith('ratelimit'))
    assert.deepEqual(got, httpHeaders)
  })

  test('reject: denied_response with 429, Retry-After, RateLimit-*, X-Fairvisor-Reason and the HTTP body', async () => {
    for (let i = 0; i < 2; i++)
      assert.equal(
        (await c.check(checkRequest({ path: '/api/x', peer: '127.0.0.1', headers: { 'x-user': 'bob' } }))).http_response,
        'ok_response',
      )
    const r = await c.check(checkRequest({ path: '/api/x', peer: '127.0.0.1', headers: { 'x-user': 'bob' } }))
    assert.equal(r.http_response, 'denied_response')
    assert.equal(r.status.code, 7) // PERMISSION_DENIED: Envoy answers with denied_response
    assert.equal(r.denied_response.status.code, 429)
    // The same subject over the HTTP decision API: the same decision, written by the HTTP path.
    const http = await fetch(`${gw.url}/v1/decision`, {
      method: 'POST',
      headers: { 'x-original-method': 'GET', 'x-original-uri': '/api/x', 'x-user': 'bob' },
    })
    assert.equal(http.status, 429)
    const body = await http.text()
    assert.match(body, /^\{"error":"too_many_requests","reason":"token_bucket_exceeded","retry_after":\d+\}$/)
    // Retry-After (jittered per subject and address: the same here) counts down between the two calls: compare it within a second, the rest exactly.
    const retry = (text: string): number => Number(/"retry_after":(\d+)/.exec(text)![1])
    assert.equal(r.denied_response.body.replace(/\d+\}$/, ''), body.replace(/\d+\}$/, ''))
    assert.ok(Math.abs(retry(r.denied_response.body) - retry(body)) <= 1)
    const got = comparable(headerList(r.denied_response.headers))
    const timeless = (h: [string, string][]): [string, string][] =>
      h.filter(([k]) => !['retry-after', 'ratelimit-reset', 'ratelimit'].includes(k))
    assert.deepEqual(timeless(got), timeless(comparable([...http.headers].flat())))
    assert.deepEqual(
      got.map(([k]) => k),
      comparable([...http.headers].flat()).map(([k]) => k),
    )
    assert.equal(got.find(([k]) => k === 'retry-after')?.[1], String(retry(r.denied_response.body)))
    assert.equal(got.find(([k]) => k === 'x-fairvisor-reason')?.[1], 'token_bucket_exceeded')
  })

  test('shadow: a shadow policy over its limit still allows', async () => {
    for (let i = 0; i < 4; i++) {
      const r = await c.check(checkRequest({ path: '/trial/x', headers: { 'x-user': 'carol' } }))
      assert.equal(r.http_response, 'ok_response', `call ${i}`)
    }
    // It did go over: the shadow reject is logged (and counted), not enforced.
    await gw.waitForLog((l) => l.event === 'would_reject' && l.policy === 'trial')
  })

  test('the source address is ip:address: X-Forwarded-For from an untrusted peer is not believed', async () => {
    const r = await c.check(checkRequest({ path: '/nothing', peer: '198.51.100.9', headers: { 'x-forwarded-for': '203.0.113.1' } }))
    assert.equal(r.http_response, 'ok_response')
  })

  test('malformed messages: INVALID_ARGUMENT, and the gateway keeps serving', async () => {
    await assert.rejects(
      c.raw('/envoy.service.auth.v3.Authorization/Check', Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x01])),
      (e: { code: number }) => e.code === Code.INVALID_ARGUMENT,
    )
    await assert.rejects(
      c.raw('/envoy.service.auth.v3.Authorization/Check', Buffer.from([0xff, 0xff, 0xff])),
      (e: { code: number }) => e.code === Code.INVALID_ARGUMENT,
    )
    await assert.rejects(
      c.check({}),
      (e: { code: number; details: string }) => e.code === Code.INVALID_ARGUMENT && /attributes\.request\.http/.test(e.details),
    )
    await assert.rejects(
      c.check({ attributes: { request: { http: { path: 'no-slash' } } } }),
      (e: { code: number }) => e.code === Code.INVALID_ARGUMENT,
    )
    assert.equal((await c.check(checkRequest({ path: '/api/ok', headers: { 'x-user': 'dave' } }))).http_response, 'ok_response')
    assert.ok(((await metricValue(gw, 'fairvisor_grpc_calls_total', 'code="INVALID_ARGUMENT"')) ?? 0) >= 4)
    assert.ok(
      ((await metricValue(gw, 'fairvisor_grpc_calls_total', 'method="envoy.service.auth.v3.Authorization/Check",code="OK"')) ?? 0) >= 1,
    )
  })
})
