/**
 * A client that sends its real key where the upstream reads it and junk where the gateway
 * could look first buys no capacity (docs/descriptors.md): through the real gateway in front of
 * a real upstream that bills the key as the API does. `llm:api_key` is the credential the API of
 * the path bills (OpenAI: the bearer token; Azure OpenAI: `api-key`), a request header whose name
 * holds `_` is not the header of that name with `-`, and a keyed header, query parameter or
 * Authorization repeated with different values is refused 400. The decision service, ext_authz
 * and nginx auth_request are in credential-keys-decision.test.ts.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import { type Billing, passed, rawStatus, startBilling, statuses, writeBundle } from '../helpers/credential-upstream.js'
import { startGateway, type GatewayProcess } from '../helpers/processes.js'

describe('llm:api_key is the credential the upstream bills (policies/llm-openai.json)', { timeout: 120_000 }, () => {
  let up: Billing
  let gw: GatewayProcess
  before(async () => {
    up = await startBilling()
    gw = await startGateway({ FAIRVISOR_BACKEND_URL: up.url, FAIRVISOR_CONFIG_FILE: 'policies/llm-openai.json' })
  })
  after(async () => {
    await gw?.stop()
    await up?.close()
  })

  const chat = (headers: Record<string, string>): Promise<number> =>
    fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }], max_tokens: 4096 }),
    }).then(async (r) => {
      await r.arrayBuffer()
      return r.status
    })

  test('Authorization: Bearer sk-REAL plus a fresh x-api-key per call gets what the bearer alone gets', async () => {
    // 30,000 tokens a minute, 4,096 + a few reserved per call: 7 pass on one key.
    const alone = await statuses(20, () => chat({ authorization: 'Bearer sk-ALONE' }))
    assert.equal(passed(alone), 7, String(alone))
    const junk = await statuses(20, () => chat({ authorization: 'Bearer sk-REAL', 'x-api-key': `junk-${randomUUID()}` }))
    assert.equal(passed(junk), passed(alone), `${junk}`)
    assert.ok(
      junk.slice(passed(junk)).every((s) => s === 429),
      `${junk}`,
    )
    assert.equal(up.billed.get('sk-REAL'), passed(junk), 'the upstream billed sk-REAL only what the gateway counted')
  })

  test('a second Authorization line with another token is refused, in the API error shape', async () => {
    const r = await rawStatus(gw.port, 'POST /v1/chat/completions HTTP/1.1', [
      ['Authorization', `Bearer junk-${randomUUID()}`],
      ['Authorization', 'Bearer sk-OTHER'],
      ['Content-Length', '0'],
    ])
    assert.equal(r, 400)
    const res = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer junk,Bearer sk-OTHER' },
      body: '{"model":"m","messages":[]}',
    })
    assert.equal(res.status, 400)
    const body = (await res.json()) as { error: { type: string; message: string } }
    assert.equal(body.error.type, 'invalid_request_error')
    assert.match(body.error.message, /authorization header holds more than one credential/)
    assert.equal(up.billed.get('sk-OTHER'), undefined)
  })
})

describe('keys a client could double or respell, through the reverse proxy', { timeout: 120_000 }, () => {
  let up: Billing
  let gw: GatewayProcess
  before(async () => {
    up = await startBilling()
    gw = await startGateway({ FAIRVISOR_BACKEND_URL: up.url, FAIRVISOR_CONFIG_FILE: writeBundle() })
  })
  after(async () => {
    await gw?.stop()
    await up?.close()
  })

  test('Azure OpenAI: the real key in api-key and a fresh x-api-key per call is charged to the real key', async () => {
    const path = '/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21'
    const s = await statuses(10, () =>
      rawStatus(gw.port, `POST ${path} HTTP/1.1`, [
        ['api-key', 'az-REAL'],
        ['x-api-key', `junk-${randomUUID()}`],
        ['Content-Length', '0'],
      ]),
    )
    assert.deepEqual(s, [200, 200, 200, 429, 429, 429, 429, 429, 429, 429])
    assert.equal(up.billed.get('az-REAL'), 3)
    // An Entra ID bearer token beside a different api-key: Azure reads both, which one it bills is not known.
    const both = await rawStatus(gw.port, `POST ${path} HTTP/1.1`, [
      ['api-key', 'az-OTHER'],
      ['Authorization', `Bearer junk-${randomUUID()}`],
      ['Content-Length', '0'],
    ])
    assert.equal(both, 400)
  })

  test('header:x-api-key, burst 2: X_Api_Key: <fresh> before X-Api-Key: REAL is charged to REAL', async () => {
    const s = await statuses(10, () =>
      rawStatus(gw.port, 'GET /h/data HTTP/1.1', [
        ['X_Api_Key', `junk-${randomUUID()}`],
        ['X-Api-Key', 'REAL'],
      ]),
    )
    assert.deepEqual(s, [200, 200, 429, 429, 429, 429, 429, 429, 429, 429])
    assert.equal(up.billed.get('REAL'), 2, 'the backend authenticated REAL on exactly the two the gateway let through')
  })

  test('header:x-api-key: a doubled X-Api-Key with a fresh first value is refused, never counted on the first alone', async () => {
    const s = await statuses(10, () =>
      rawStatus(gw.port, 'GET /h/data HTTP/1.1', [
        ['X-Api-Key', `junk-${randomUUID()}`],
        ['X-Api-Key', 'REAL2'],
      ]),
    )
    assert.deepEqual(new Set(s), new Set([400]), `${s}`)
    assert.equal(up.count, 5, 'nothing of the refused requests reached the backend')
    // The same value twice is one key.
    const same = await statuses(3, () =>
      rawStatus(gw.port, 'GET /h/data HTTP/1.1', [
        ['X-Api-Key', 'REAL3'],
        ['x-api-key', 'REAL3'],
      ]),
    )
    assert.deepEqual(same, [200, 200, 429])
  })

  test('query:tenant: ?tenant=<fresh>&tenant=REAL is refused', async () => {
    const s = await statuses(5, () => rawStatus(gw.port, `GET /q/x?tenant=junk-${randomUUID()}&tenant=REAL HTTP/1.1`, []))
    assert.deepEqual(new Set(s), new Set([400]), `${s}`)
    const one = await statuses(3, () => rawStatus(gw.port, 'GET /q/x?tenant=REAL HTTP/1.1', []))
    assert.deepEqual(one, [200, 200, 429])
  })
})
