/**
 * The gRPC listener with two worker threads, through the real gateway
 * process: every worker serves gRPC on the one port (as for HTTP), and calls
 * that land on different workers share one set of limits (the shared table).
 */
import assert from 'node:assert/strict'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { checkRequest, grpcClients } from '../helpers/grpc-client.js'
import { startGateway, type GatewayProcess } from '../helpers/processes.js'

const BURST = 100
const bucket = (name: string, key: string, burst: number) => ({
  name,
  limit_keys: [key],
  algorithm: 'token_bucket',
  algorithm_config: { tokens_per_second: 0.0001, burst },
})

describe('gRPC with two worker threads', () => {
  let gw: GatewayProcess
  let port: number
  before(async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'fv-grpc-workers-')), 'bundle.json')
    writeFileSync(
      file,
      JSON.stringify({
        bundle_version: 1,
        policies: [
          { id: 'api', spec: { selector: { pathPrefix: '/api/' }, rules: [bucket('per_user', 'header:x-user', BURST)] } },
          // One token for everybody, in shadow: after the first call every call logs would_reject, with its worker's id.
          { id: 'probe', spec: { selector: { pathPrefix: '/probe/' }, mode: 'shadow', rules: [bucket('probe', 'header:x-probe', 1)] } },
        ],
      }),
    )
    gw = await startGateway(
      { FAIRVISOR_MODE: 'decision_service', FAIRVISOR_CONFIG_FILE: file, FAIRVISOR_GRPC_PORT: '0', FAIRVISOR_WORKERS: '2' },
      { timeoutMs: 60_000 },
    )
    const line = await gw.waitForLog((l) => typeof l.msg === 'string' && l.msg.startsWith('fairvisor listening'), 60_000)
    assert.equal(line.workers, 2)
    port = line.grpcPort as number
    assert.ok(port > 0, 'the supervisor reports the gRPC port')
  })
  after(async () => {
    await gw?.stop()
  })

  test('every worker answers gRPC: calls on fresh connections are served by worker 1 and by worker 2', async () => {
    const seen = (): Set<unknown> => new Set(gw.logs.filter((l) => l.event === 'would_reject').map((l) => l.worker))
    // Each call on its own connection; the kernel hands each connection to one of the workers accepting on the socket.
    for (let i = 0; i < 200 && seen().size < 2; i++) {
      const c = grpcClients(port)
      try {
        const r = await c.check(checkRequest({ path: '/probe/x', headers: { 'x-probe': 'all' } }))
        assert.equal(r.http_response, 'ok_response', 'shadow allows')
      } finally {
        c.close()
      }
    }
    assert.deepEqual([...seen()].sort(), [1, 2])
  })

  test('64 concurrent clients on one key over both workers: exactly the burst is allowed (0 % over-grant)', async () => {
    const clients = Array.from({ length: 64 }, () => grpcClients(port))
    try {
      const answers = await Promise.all(
        clients.flatMap((c) =>
          Array.from({ length: 5 }, () => c.check(checkRequest({ path: '/api/items', headers: { 'x-user': 'shared' } }))),
        ),
      )
      const allowed = answers.filter((r) => r.http_response === 'ok_response').length
      const denied = answers.filter((r) => r.http_response === 'denied_response')
      assert.equal(allowed, BURST)
      assert.equal(denied.length, 320 - BURST)
      assert.ok(denied.every((r) => r.denied_response.status.code === 429))
    } finally {
      for (const c of clients) c.close()
    }
  })
})
