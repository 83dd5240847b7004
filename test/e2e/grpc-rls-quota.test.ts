/**
 * Envoy's token-quota pattern through the gateway, on the in-process store,
 * the shared-memory store of two workers, Redis and PostgreSQL: a check-only
 * call (a descriptor hits_addend of 0, which Envoy encodes as an empty
 * wrapper) on the request path, a charge of 1 on the response path. As
 * envoyproxy/ratelimit's integration script token-quota.sh: with 2 a unit,
 * the 4th request is rejected, because the 3rd request's charge (over the
 * limit) still counts, with STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT too (it
 * spares the descriptors of a rejected call that do not go over, not the one
 * that does).
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, test } from 'node:test'
import { grpcClients, type GrpcClients } from '../helpers/grpc-client.js'
import { startGateway, type GatewayProcess } from '../helpers/processes.js'

const OK = 1
const OVER_LIMIT = 2

function config(): string {
  const file = join(mkdtempSync(join(tmpdir(), 'fv-rls-quota-')), 'config.yaml')
  writeFileSync(file, 'domain: quota\ndescriptors:\n  - key: service\n    rate_limit: {unit: hour, requests_per_unit: 2}\n')
  return file
}

describe("Envoy's token quota over RLS", () => {
  const running: Array<{ gw: GatewayProcess; c: GrpcClients }> = []
  after(async () => {
    for (const r of running) {
      r.c.close()
      await r.gw.stop()
    }
  })

  const cases = [
    ['in-process store', {}, [OK, OK, OK, OVER_LIMIT, OVER_LIMIT]],
    ['shared memory, 2 workers', { FAIRVISOR_WORKERS: '2' }, [OK, OK, OK, OVER_LIMIT, OVER_LIMIT]],
    ['Redis', { FAIRVISOR_STORE: 'redis://127.0.0.1:6379', FAIRVISOR_STORE_TIMEOUT_MS: '2000' }, [OK, OK, OK, OVER_LIMIT, OVER_LIMIT]],
    [
      'PostgreSQL',
      { FAIRVISOR_STORE: 'postgres://postgres@127.0.0.1:5432/test', FAIRVISOR_STORE_TIMEOUT_MS: '2000' },
      [OK, OK, OK, OVER_LIMIT, OVER_LIMIT],
    ],
    [
      'in-process store, STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT',
      { STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT: 'true' },
      [OK, OK, OK, OVER_LIMIT, OVER_LIMIT],
    ],
  ] as const
  for (const [name, env, expected] of cases) {
    test(`${name}: the checks answer ${expected.map((c) => (c === OK ? 'OK' : 'OVER_LIMIT')).join(', ')}`, async () => {
      const gw = await startGateway({
        FAIRVISOR_MODE: 'decision_service',
        FAIRVISOR_GRPC_PORT: '0',
        FAIRVISOR_RLS_CONFIG: config(),
        ...env,
      })
      const line = await gw.waitForLog((l) => typeof l.msg === 'string' && l.msg.startsWith('fairvisor listening'))
      const c = grpcClients(line.grpcPort as number)
      running.push({ gw, c })
      // A service of its own: Redis and PostgreSQL are shared, its counters outlive the test.
      const service = randomUUID()
      const call = (hits_addend: object) =>
        c.shouldRateLimit({ domain: 'quota', descriptors: [{ entries: [{ key: 'service', value: service }], hits_addend }] })
      const checks: number[] = []
      for (let i = 0; i < expected.length; i++) {
        checks.push((await call({})).overall_code) // request path: check only
        await call({ value: 1 }) // response path: the charge
      }
      assert.deepEqual(checks, expected)
    })
  }
})
