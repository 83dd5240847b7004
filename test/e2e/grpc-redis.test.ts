/**
 * gRPC on a shared Redis: exact limits across two gateway processes under 64
 * concurrent clients, and the fail policy's answer when Redis is gone
 * (ShouldRateLimit with FAIRVISOR_RLS_STORE_FAILURE=policy; its default, an
 * error, is in grpc-rls-store-outage.test.ts).
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, test } from 'node:test'
import { checkRequest, grpcClients, type GrpcClients } from '../helpers/grpc-client.js'
import { startGateway, type GatewayProcess } from '../helpers/processes.js'
import { startRedis, type RedisServer } from '../helpers/redis-servers.js'

const BURST = 100
const RLS_LIMIT = 150

function writeConfig(): { bundle: string; rls: string } {
  const dir = mkdtempSync(join(tmpdir(), 'fv-grpc-redis-'))
  const bundle = join(dir, 'bundle.json')
  // No refill worth speaking of during the test: exactly BURST calls may pass.
  writeFileSync(
    bundle,
    JSON.stringify({
      bundle_version: 1,
      policies: [
        {
          id: 'api',
          spec: {
            selector: { pathPrefix: '/' },
            rules: [
              {
                name: 'per_user',
                limit_keys: ['header:x-user'],
                algorithm: 'token_bucket',
                algorithm_config: { tokens_per_second: 0.0001, burst: BURST },
              },
            ],
          },
        },
      ],
    }),
  )
  const rls = join(dir, 'rls.yaml')
  writeFileSync(rls, `domain: shared\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: ${RLS_LIMIT}}\n`)
  return { bundle, rls }
}

async function start(env: Record<string, string>): Promise<{ gw: GatewayProcess; c: GrpcClients }> {
  const gw = await startGateway({ FAIRVISOR_MODE: 'decision_service', FAIRVISOR_GRPC_PORT: '0', ...env })
  const line = await gw.waitForLog((l) => typeof l.msg === 'string' && l.msg.startsWith('fairvisor listening'))
  return { gw, c: grpcClients(line.grpcPort as number) }
}

describe('gRPC on Redis', () => {
  const cleanup: Array<() => unknown> = []
  after(async () => {
    for (const f of cleanup.reverse()) await f()
  })

  test('64 concurrent clients on one key over two gateways: exactly the limit passes (0 % over-grant)', async () => {
    const { bundle, rls } = writeConfig()
    const env = {
      FAIRVISOR_STORE: 'redis://127.0.0.1:6379',
      FAIRVISOR_CONFIG_FILE: bundle,
      FAIRVISOR_RLS_CONFIG: rls,
      FAIRVISOR_STORE_TIMEOUT_MS: '2000',
      FAIRVISOR_FAIL_POLICY: 'closed',
    }
    const a = await start(env)
    cleanup.push(
      () => a.gw.stop(),
      () => a.c.close(),
    )
    const b = await start(env)
    cleanup.push(
      () => b.gw.stop(),
      () => b.c.close(),
    )
    const user = randomUUID()
    const CALLS = 5
    let allowed = 0
    let rlsOk = 0
    let other = 0
    await Promise.all(
      Array.from({ length: 64 }, async (_, i) => {
        const c = i % 2 === 0 ? a.c : b.c
        for (let j = 0; j < CALLS; j++) {
          const [r, q] = await Promise.all([
            c.check(checkRequest({ path: '/work', headers: { 'x-user': user } })),
            c.shouldRateLimit({ domain: 'shared', descriptors: [{ entries: [{ key: 'user', value: user }] }] }),
          ])
          if (r.http_response === 'ok_response') allowed++
          else if (r.denied_response.status.code !== 429) other++
          if (q.overall_code === 1) rlsOk++
        }
      }),
    )
    console.log(`ext_authz allowed ${allowed} of ${64 * CALLS} (burst ${BURST}); RLS OK ${rlsOk} of ${64 * CALLS} (limit ${RLS_LIMIT})`)
    assert.equal(other, 0)
    assert.equal(allowed, BURST)
    assert.equal(rlsOk, RLS_LIMIT)
  })

  for (const policy of ['open', 'closed'] as const) {
    test(`Redis stopped, fail ${policy}, FAIRVISOR_RLS_STORE_FAILURE=policy: Check and ShouldRateLimit answer the fail policy`, async () => {
      const redis: RedisServer = await startRedis()
      cleanup.push(() => redis.stop())
      const { bundle, rls } = writeConfig()
      const { gw, c } = await start({
        FAIRVISOR_STORE: redis.url,
        FAIRVISOR_CONFIG_FILE: bundle,
        FAIRVISOR_RLS_CONFIG: rls,
        FAIRVISOR_FAIL_POLICY: policy,
        FAIRVISOR_RLS_STORE_FAILURE: 'policy',
        FAIRVISOR_STORE_TIMEOUT_MS: '200',
      })
      cleanup.push(
        () => gw.stop(),
        () => c.close(),
      )
      const ask = () =>
        Promise.all([
          c.check(checkRequest({ path: '/work', headers: { 'x-user': 'u' } })),
          c.shouldRateLimit({ domain: 'shared', descriptors: [{ entries: [{ key: 'user', value: 'u' }] }] }),
        ])
      const [up, upRls] = await ask()
      assert.equal(up.http_response, 'ok_response')
      assert.equal(upRls.statuses[0].limit_remaining, RLS_LIMIT - 1)
      await redis.kill()
      const [down, downRls] = await ask()
      if (policy === 'open') {
        assert.equal(down.http_response, 'ok_response')
        assert.equal(downRls.overall_code, 1)
      } else {
        assert.equal(down.http_response, 'denied_response')
        assert.equal(down.denied_response.status.code, 503)
        assert.equal(down.status.code, 14)
        assert.match(down.denied_response.body, /service_unavailable/)
        assert.equal(downRls.overall_code, 2)
      }
      // Back up: counting resumes.
      await redis.restart()
      const [, again] = await ask()
      assert.equal(typeof again.overall_code, 'number')
    })
  }
})
