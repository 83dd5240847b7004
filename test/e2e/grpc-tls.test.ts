/**
 * The gRPC listener over TLS, through the real gateway process and a grpc-js
 * client: with a certificate and key it serves TLS only; with a client CA it
 * also demands a client certificate that chains to it (mutual TLS, as a mesh
 * sidecar presents); a missing file stops start-up with exit code 2.
 */
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { connect } from 'node:http2'
import { createConnection } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { type ChannelCredentials, credentials, type ServiceError } from '@grpc/grpc-js'
import { testCa, type TestCa } from '../helpers/certs.js'
import { checkRequest, grpcClients } from '../helpers/grpc-client.js'
import { CLI, startGateway, type GatewayProcess } from '../helpers/processes.js'

/** One Check over TLS: the answer's oneof, or the error's gRPC code. */
async function check(port: number, creds: ChannelCredentials): Promise<string | number> {
  const c = grpcClients(port, creds)
  try {
    return (await c.check(checkRequest({ path: '/api/x', headers: { 'x-user': 'tls' } }))).http_response
  } catch (err) {
    return (err as ServiceError).code
  } finally {
    c.close()
  }
}

describe('gRPC listener over TLS', () => {
  let dir: string
  let ca: TestCa
  let server: { cert: string; key: string }
  let bundle: string
  const gateways: GatewayProcess[] = []
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'fv-grpc-tls-'))
    ca = testCa(dir)
    server = ca.issue('server', 'IP:127.0.0.1,DNS:localhost')
    bundle = join(dir, 'bundle.json')
    writeFileSync(bundle, JSON.stringify({ bundle_version: 1, policies: [] }))
  })
  after(async () => {
    for (const g of gateways) await g.stop()
  })

  async function gateway(env: Record<string, string>): Promise<number> {
    const gw = await startGateway({
      FAIRVISOR_MODE: 'decision_service',
      FAIRVISOR_CONFIG_FILE: bundle,
      FAIRVISOR_GRPC_PORT: '0',
      FAIRVISOR_GRPC_TLS_CERT_FILE: server.cert,
      FAIRVISOR_GRPC_TLS_KEY_FILE: server.key,
      ...env,
    })
    gateways.push(gw)
    const line = await gw.waitForLog((l) => typeof l.msg === 'string' && l.msg.startsWith('fairvisor listening'))
    return line.grpcPort as number
  }

  test('TLS: a client trusting the CA is served; a plaintext client is not', async () => {
    const port = await gateway({})
    assert.equal(await check(port, credentials.createSsl(readFileSync(ca.ca))), 'ok_response')
    assert.equal(await check(port, credentials.createInsecure()), 14) // UNAVAILABLE
  })

  test('mutual TLS: only a client with a certificate from the client CA is served', async () => {
    const clientCa = testCa(mkdtempSync(join(dir, 'clients-')))
    const client = clientCa.issue('client', 'DNS:sidecar.example')
    const port = await gateway({ FAIRVISOR_GRPC_TLS_CLIENT_CA_FILE: clientCa.ca })
    const root = readFileSync(ca.ca)
    assert.equal(await check(port, credentials.createSsl(root, readFileSync(client.key), readFileSync(client.cert))), 'ok_response')
    assert.equal(await check(port, credentials.createSsl(root)), 14, 'no client certificate')
    const stranger = ca.issue('stranger', 'DNS:stranger.example')
    assert.equal(await check(port, credentials.createSsl(root, readFileSync(stranger.key), readFileSync(stranger.cert))), 14, 'wrong CA')
  })

  test('SIGTERM: neither an idle TLS session nor a connection that never starts its handshake holds the drain past its bound', async () => {
    const port = await gateway({ FAIRVISOR_SHUTDOWN_TIMEOUT_MS: '1000' })
    const gw = gateways.at(-1)!
    // Accepted first (the listener accepts in order): by the time the session below is up, the server holds both.
    const silent = createConnection(port, '127.0.0.1').on('error', () => {})
    const idle = connect(`https://127.0.0.1:${port}`, { ca: readFileSync(ca.ca) }).on('error', () => {})
    await new Promise((r) => idle.once('remoteSettings', r))
    const t0 = Date.now()
    try {
      assert.equal(await gw.stop(), 0)
      // Before, the handshake held the listener open until the TLS handshake timeout (120 s).
      assert.ok(Date.now() - t0 < 4000, `stop took ${Date.now() - t0} ms`)
    } finally {
      silent.destroy()
      idle.destroy()
    }
  })

  test('a certificate file that cannot be read stops start-up with exit code 2 and names the setting', () => {
    const r = spawnSync(process.execPath, [CLI], {
      env: {
        ...process.env,
        FAIRVISOR_MODE: 'decision_service',
        FAIRVISOR_GRPC_PORT: '0',
        FAIRVISOR_GRPC_TLS_CERT_FILE: join(dir, 'nope.pem'),
        FAIRVISOR_GRPC_TLS_KEY_FILE: server.key,
      },
      encoding: 'utf8',
      timeout: 20_000,
    })
    assert.equal(r.status, 2)
    assert.match(r.stderr, /FAIRVISOR_GRPC_TLS_CERT_FILE/)
  })
})
