/**
 * A client that sends its real key where the upstream reads it and junk where the gateway
 * could look first buys no capacity (docs/behaviour.md §3): through the real gateway, with a
 * real upstream that bills the key as the API does. `llm:api_key` is the credential the API of
 * the path bills (OpenAI: the bearer token; Azure OpenAI: `api-key`), a request header whose
 * name holds `_` is not the header of that name with `-`, and a keyed header, query parameter,
 * Authorization or X-Original-* header repeated with different values is refused 400, in
 * reverse-proxy mode, in the decision API and over gRPC ext_authz.
 */
import assert from 'node:assert/strict'
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { mkdtempSync, writeFileSync } from 'node:fs'
import type { IncomingMessage } from 'node:http'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { checkRequest, grpcClients, type GrpcClients } from '../helpers/grpc-client.js'
import { docsNginxBlock, nginxConf } from '../helpers/nginx.js'
import { freePort, startBackend, startGateway, type Backend, type GatewayProcess } from '../helpers/processes.js'
import { waitFor } from '../helpers/wait.js'

const HAVE_NGINX = spawnSync('nginx', ['-v']).error === undefined
if (!HAVE_NGINX) console.error('\n\n*** nginx NOT INSTALLED: the auth_request part of credential-keys is SKIPPED ***\n\n')

/** A real upstream that bills each call as the API would: Azure OpenAI by `api-key`, OpenAI by the bearer token, the others by `x-api-key` as Node reads it. */
interface Billing extends Backend {
  billed: Map<string, number>
}

function billedKey(req: IncomingMessage): string {
  if (req.url!.startsWith('/openai/')) return String(req.headers['api-key'])
  if (req.url!.startsWith('/v1/')) return String(req.headers.authorization).replace(/^Bearer /, '')
  return String(req.headers['x-api-key'])
}

async function startBilling(): Promise<Billing> {
  const billed = new Map<string, number>()
  const b = await startBackend((req, res) => {
    req.resume()
    req.on('end', () => {
      const k = billedKey(req)
      billed.set(k, (billed.get(k) ?? 0) + 1)
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(
        JSON.stringify({
          id: 'c1',
          object: 'chat.completion',
          choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, finish_reason: 'stop' }],
        }),
      )
    })
  })
  return Object.assign(b, { billed })
}

const tb = (name: string, key: string, burst: number): object => ({
  name,
  limit_keys: [key],
  algorithm: 'token_bucket',
  algorithm_config: { tokens_per_second: 0.001, burst },
})
const BUNDLE = {
  bundle_version: 1,
  policies: [
    { id: 'azure', spec: { selector: { pathPrefix: '/openai/' }, rules: [tb('per_azure_key', 'llm:api_key', 3)] } },
    { id: 'header', spec: { selector: { pathPrefix: '/h/' }, rules: [tb('per_key', 'header:x-api-key', 2)] } },
    { id: 'query', spec: { selector: { pathPrefix: '/q/' }, rules: [tb('per_tenant', 'query:tenant', 2)] } },
  ],
}

function writeBundle(): string {
  const file = join(mkdtempSync(join(tmpdir(), 'fv-creds-')), 'bundle.json')
  writeFileSync(file, JSON.stringify(BUNDLE))
  return file
}

/** Sends one request byte for byte (header names, order and repeats exactly as given); resolves with the status. */
function rawStatus(port: number, requestLine: string, headers: [string, string][]): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1')
    let got = ''
    s.setEncoding('latin1')
    s.on('data', (d: string) => {
      got += d
      const m = /^HTTP\/1\.1 (\d{3})/.exec(got)
      if (m) {
        resolve(Number(m[1]))
        s.destroy()
      }
    })
    s.on('error', reject)
    s.on('close', () => reject(new Error(`no status line: ${JSON.stringify(got)}`)))
    const lines = [requestLine, 'Host: api.example.com', ...headers.map(([k, v]) => `${k}: ${v}`), 'Connection: close', '', '']
    s.write(lines.join('\r\n'))
  })
}

/** Statuses of `n` requests, in order. */
async function statuses(n: number, one: (i: number) => Promise<number>): Promise<number[]> {
  const out: number[] = []
  for (let i = 0; i < n; i++) out.push(await one(i))
  return out
}

const passed = (s: number[]): number => s.filter((x) => x === 200).length

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

describe('decision service and ext_authz: the same keys, and X-Original-* headers that must be single', { timeout: 120_000 }, () => {
  let gw: GatewayProcess
  let c: GrpcClients
  before(async () => {
    gw = await startGateway({ FAIRVISOR_MODE: 'decision_service', FAIRVISOR_CONFIG_FILE: writeBundle(), FAIRVISOR_GRPC_PORT: '0' })
    const line = await gw.waitForLog((l) => typeof l.msg === 'string' && l.msg.startsWith('fairvisor listening'))
    c = grpcClients(line.grpcPort as number)
  })
  after(async () => {
    c?.close()
    await gw?.stop()
  })

  test('POST /v1/decision: X_Api_Key is not X-Api-Key; a doubled key or X-Original-URI is refused', async () => {
    const decide = (headers: [string, string][]): Promise<number> =>
      rawStatus(gw.port, 'POST /v1/decision HTTP/1.1', [['Content-Length', '0'], ...headers])
    const smuggled = await statuses(5, () =>
      decide([
        ['X-Original-Method', 'GET'],
        ['X-Original-URI', '/h/d'],
        ['X_Api_Key', `junk-${randomUUID()}`],
        ['X-Api-Key', 'DREAL'],
      ]),
    )
    assert.deepEqual(smuggled, [200, 200, 429, 429, 429])
    const doubled = await decide([
      ['X-Original-URI', '/h/d'],
      ['X-Api-Key', `junk-${randomUUID()}`],
      ['X-Api-Key', 'DREAL2'],
    ])
    assert.equal(doubled, 400)
    // A client-sent X-Original-URI beside the proxy's: which path was it?
    const uri = await decide([
      ['X-Original-URI', '/elsewhere'],
      ['X-Original-URI', '/h/d'],
      ['X-Api-Key', 'DREAL3'],
    ])
    assert.equal(uri, 400)
  })

  test('ext_authz: a credential joined by Envoy (`a,b`) and a key repeated in header_map are refused 400', async () => {
    const azure = await c.check(
      checkRequest({ method: 'POST', path: '/openai/v1/chat/completions', headers: { 'api-key': `junk-${randomUUID()},az-REAL` } }),
    )
    assert.equal(azure.http_response, 'denied_response')
    assert.equal(azure.denied_response.status.code, 400)
    const raw = {
      attributes: {
        request: {
          http: {
            method: 'GET',
            path: '/h/x',
            host: 'api.example.com',
            header_map: {
              headers: [
                { key: 'x-api-key', raw_value: Buffer.from(`junk-${randomUUID()}`) },
                { key: 'x-api-key', raw_value: Buffer.from('GREAL') },
              ],
            },
          },
        },
      },
    }
    const r = await c.check(raw)
    assert.equal(r.http_response, 'denied_response')
    assert.equal(r.denied_response.status.code, 400)
  })
})

describe('behind the documented nginx auth_request block', { skip: !HAVE_NGINX, timeout: 120_000 }, () => {
  let gw: GatewayProcess
  let up: Billing
  let nginx: ChildProcess
  let port: number
  let nginxErr = ''
  before(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fv-creds-nginx-'))
    up = await startBilling()
    gw = await startGateway({
      FAIRVISOR_MODE: 'decision_service',
      FAIRVISOR_CONFIG_FILE: writeBundle(),
      FAIRVISOR_TRUSTED_PROXIES: '127.0.0.1',
    })
    port = await freePort()
    const block = docsNginxBlock('nginx-auth-request')
    assert.ok(block, 'docs/integrations.md has the auth_request block')
    const server = block
      .replace('server 127.0.0.1:8080;', `server 127.0.0.1:${gw.port};`)
      .replace('server 127.0.0.1:3000;', `server 127.0.0.1:${up.port};`)
      .replace('listen 80;', `listen 127.0.0.1:${port};`)
    writeFileSync(join(dir, 'nginx.conf'), nginxConf(dir, server))
    nginx = spawn('nginx', ['-p', dir, '-c', join(dir, 'nginx.conf')], { stdio: ['ignore', 'ignore', 'pipe'] })
    nginx.stderr!.on('data', (c: Buffer) => (nginxErr += c.toString()))
    await waitFor(
      () =>
        rawStatus(port, 'GET /ping HTTP/1.1', []).then(
          () => true,
          () => false,
        ),
      'nginx answering',
      20_000,
      100,
    )
  })
  after(async () => {
    if (nginx && nginx.exitCode === null) {
      const exited = new Promise((r) => nginx.once('exit', r))
      nginx.kill('SIGQUIT')
      await exited
    }
    await gw?.stop()
    await up?.close()
  })

  test('X_Api_Key: <fresh> beside X-Api-Key: REAL is charged to REAL; a doubled X-Api-Key is refused 400', async () => {
    const smuggled = await statuses(5, () =>
      rawStatus(port, 'GET /h/n HTTP/1.1', [
        ['X_Api_Key', `junk-${randomUUID()}`],
        ['X-Api-Key', 'NREAL'],
      ]),
    )
    assert.deepEqual(smuggled, [200, 200, 429, 429, 429], nginxErr)
    assert.equal(up.billed.get('NREAL'), 2)
    const doubled = await statuses(5, () =>
      rawStatus(port, 'GET /h/n HTTP/1.1', [
        ['X-Api-Key', `junk-${randomUUID()}`],
        ['X-Api-Key', 'NREAL2'],
      ]),
    )
    assert.deepEqual(new Set(doubled), new Set([400]), `${doubled} ${nginxErr}`)
    assert.deepEqual(
      [...up.billed.keys()].filter((k) => k.includes('NREAL')),
      ['NREAL'],
      'the refused requests never reached the backend',
    )
  })
})
