/**
 * The keys a client could respell or repeat (docs/descriptors.md) in the decision service: its
 * HTTP API (a repeated X-Original-* header is refused 400 too), gRPC ext_authz (a credential
 * Envoy joined into `a,b`, a key repeated in `header_map`) and behind the documented nginx
 * auth_request block (nginx drops X_Api_Key; a doubled X-Api-Key comes back as a 400).
 */
import assert from 'node:assert/strict'
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { type Billing, rawStatus, startBilling, statuses, writeBundle } from '../helpers/credential-upstream.js'
import { checkRequest, grpcClients, type GrpcClients } from '../helpers/grpc-client.js'
import { docsNginxBlock, nginxConf } from '../helpers/nginx.js'
import { freePort, startGateway, type GatewayProcess } from '../helpers/processes.js'
import { waitFor } from '../helpers/wait.js'

const HAVE_NGINX = spawnSync('nginx', ['-v']).error === undefined
if (!HAVE_NGINX) console.error('\n\n*** nginx NOT INSTALLED: the auth_request part of credential-keys-decision is SKIPPED ***\n\n')

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
