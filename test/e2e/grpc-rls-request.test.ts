/**
 * What a ShouldRateLimit call can ask beyond its descriptors, and
 * envoyproxy/ratelimit's global switches, through the real gateway process
 * over gRPC on the in-process store, the shared-memory store of two workers
 * and Redis: a descriptor's `limit` override, `metadata:` reported in
 * `dynamic_metadata` (RESPONSE_DYNAMIC_METADATA), QUOTA_MODE and SHADOW_MODE,
 * set under envoyproxy/ratelimit's own names as a migrated deployment has them.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { status as Code } from '@grpc/grpc-js'
import { grpcClients, structToJs, type GrpcClients } from '../helpers/grpc-client.js'
import { startGateway, type GatewayProcess } from '../helpers/processes.js'

const OK = 1
const OVER_LIMIT = 2
const HOUR = 3
const DAY = 4

const CONFIG = `
domain: rq
descriptors:
  - key: regular
    rate_limit: {unit: hour, requests_per_unit: 2}
    metadata: {name: service_1, svc: {tier: a}}
  - key: quota
    quota_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
    metadata: {name: service_2, svc: {zone: z}, extra: x}
  - key: free
    rate_limit: {unlimited: true}
`

const STORES = [
  ['in-process store', {}],
  ['shared memory, 2 workers', { FAIRVISOR_WORKERS: '2' }],
  ['Redis', { FAIRVISOR_STORE: 'redis://127.0.0.1:6379', FAIRVISOR_STORE_TIMEOUT_MS: '2000' }],
] as const

// Redis is shared and its counters outlive the test: every descriptor value is new.
const entry = (key: string, value = randomUUID()) => ({ key, value })
const codes = (r: { overall_code: number; statuses: Array<{ code: number }> }) => [r.overall_code, ...r.statuses.map((s) => s.code)]

for (const [store, storeEnv] of STORES) {
  describe(`ShouldRateLimit beyond descriptors, ${store}`, () => {
    const running: Array<{ gw: GatewayProcess; c: GrpcClients }> = []
    let quota: GrpcClients // QUOTA_MODE and RESPONSE_DYNAMIC_METADATA
    let shadow: GrpcClients // SHADOW_MODE, with the RateLimit-* headers

    const start = async (env: Record<string, string>): Promise<GrpcClients> => {
      const file = join(mkdtempSync(join(tmpdir(), 'fv-rls-request-')), 'config.yaml')
      writeFileSync(file, CONFIG)
      const gw = await startGateway({
        FAIRVISOR_MODE: 'decision_service',
        FAIRVISOR_GRPC_PORT: '0',
        FAIRVISOR_RLS_CONFIG: file,
        ...storeEnv,
        ...env,
      })
      const line = await gw.waitForLog((l) => typeof l.msg === 'string' && l.msg.startsWith('fairvisor listening'))
      const c = grpcClients(line.grpcPort as number)
      running.push({ gw, c })
      return c
    }
    before(async () => {
      ;[quota, shadow] = await Promise.all([
        start({ QUOTA_MODE: 'true', RESPONSE_DYNAMIC_METADATA: 'true' }),
        start({ SHADOW_MODE: 'true', LIMIT_RESPONSE_HEADERS_ENABLED: 'true' }),
      ])
    })
    after(async () => {
      for (const r of running) {
        r.c.close()
        await r.gw.stop()
      }
    })

    test("dynamic_metadata carries the request and the passed limits' metadata; QUOTA_MODE: OVER_LIMIT once every descriptor is over", async () => {
      const regular = entry('regular')
      const q = entry('quota')
      const call = () => quota.shouldRateLimit({ domain: 'rq', descriptors: [{ entries: [regular] }, { entries: [q] }] })
      const descriptors = [{ entries: [`regular=${regular.value}`] }, { entries: [`quota=${q.value}`] }]
      const first = await call()
      assert.deepEqual(codes(first), [OK, OK, OK])
      assert.deepEqual(structToJs(first.dynamic_metadata), {
        domain: 'rq',
        descriptors,
        metadata: { name: 'service_1', svc: { tier: 'a', zone: 'z' }, extra: 'x' },
      })
      // The quota descriptor is over (1 an hour), the regular one (2) is not: the call is OK, the metadata the regular one's.
      const second = await call()
      assert.deepEqual(codes(second), [OK, OK, OVER_LIMIT])
      assert.deepEqual(structToJs(second.dynamic_metadata)!.metadata, { name: 'service_1', svc: { tier: 'a' } })
      // Both over: OVER_LIMIT, and nothing passed, no metadata.
      const third = await call()
      assert.deepEqual(codes(third), [OVER_LIMIT, OVER_LIMIT, OVER_LIMIT])
      assert.deepEqual(structToJs(third.dynamic_metadata), { domain: 'rq', descriptors })
      // A descriptor without a limit is a quota one that passes; an unlimited one is not a quota one.
      const beside = (other: object) => quota.shouldRateLimit({ domain: 'rq', descriptors: [{ entries: [regular] }, other] })
      assert.deepEqual(codes(await beside({ entries: [entry('none')] })), [OK, OVER_LIMIT, OK])
      assert.deepEqual(codes(await beside({ entries: [entry('free')] })), [OVER_LIMIT, OVER_LIMIT, OK])
    })

    test("a limit override: its rate and unit in place of the configuration's, for entries it has no limit for too", async () => {
      const one = (e: object, limit: object, hits_addend?: number) =>
        quota.shouldRateLimit({ domain: 'rq', descriptors: [{ entries: [e], limit }], ...(hits_addend ? { hits_addend } : {}) })
      const regular = entry('regular')
      const first = await one(regular, { requests_per_unit: 1, unit: DAY }, 1)
      assert.deepEqual(codes(first), [OK, OK])
      assert.deepEqual(first.statuses[0].current_limit, { requests_per_unit: 1, unit: DAY })
      assert.equal(first.statuses[0].limit_remaining ?? 0, 0)
      // The override is told in the descriptor; its limit has no metadata.
      assert.deepEqual(structToJs(first.dynamic_metadata), {
        domain: 'rq',
        descriptors: [{ entries: [`regular=${regular.value}`], limit: 'requests_per_unit:1 unit:DAY' }],
        hitsAddend: 1,
      })
      assert.deepEqual(codes(await one(regular, { requests_per_unit: 1, unit: DAY })), [OVER_LIMIT, OVER_LIMIT])
      const other = entry('other')
      assert.deepEqual(codes(await one(other, { requests_per_unit: 1, unit: HOUR })), [OK, OK])
      assert.deepEqual(codes(await one(other, { requests_per_unit: 1, unit: HOUR })), [OVER_LIMIT, OVER_LIMIT])
      // In the configured limit's unit, its counter (one hit already there); in another, one of its own.
      const shared = entry('regular')
      await quota.shouldRateLimit({ domain: 'rq', descriptors: [{ entries: [shared] }] })
      assert.deepEqual(codes(await one(shared, { requests_per_unit: 1, unit: HOUR })), [OVER_LIMIT, OVER_LIMIT])
      const apart = await one(shared, { requests_per_unit: 5, unit: DAY })
      assert.deepEqual([...codes(apart), apart.statuses[0].limit_remaining], [OK, OK, 4])
      // A domain the configuration does not have: no limit; a unit that is not one: INVALID_ARGUMENT.
      const elsewhere = await quota.shouldRateLimit({
        domain: 'nowhere',
        descriptors: [{ entries: [entry('k')], limit: { requests_per_unit: 0, unit: HOUR } }],
      })
      assert.deepEqual([...codes(elsewhere), elsewhere.statuses[0].current_limit ?? null], [OK, OK, null])
      await assert.rejects(one(entry('k'), { requests_per_unit: 1, unit: 0 }), (e: { code: number }) => e.code === Code.INVALID_ARGUMENT)
    })

    test('SHADOW_MODE: every call OK, each limit still counted and its status (and headers) saying OVER_LIMIT', async () => {
      const regular = entry('regular')
      const answers = []
      for (let i = 0; i < 4; i++) {
        const r = await shadow.shouldRateLimit({ domain: 'rq', descriptors: [{ entries: [regular] }] })
        const remainingHeader = r.response_headers_to_add?.find((h: { key: string }) => h.key === 'RateLimit-Remaining')?.value
        answers.push([...codes(r), r.statuses[0].limit_remaining ?? 0, remainingHeader])
      }
      assert.deepEqual(answers, [
        [OK, OK, 1, '1'],
        [OK, OK, 0, '0'],
        [OK, OVER_LIMIT, 0, '0'],
        [OK, OVER_LIMIT, 0, '0'],
      ])
      // A limit override too; and no dynamic_metadata when RESPONSE_DYNAMIC_METADATA is off.
      const zero = await shadow.shouldRateLimit({
        domain: 'rq',
        descriptors: [{ entries: [entry('x')], limit: { requests_per_unit: 0, unit: HOUR } }],
      })
      assert.deepEqual(codes(zero), [OK, OVER_LIMIT])
      assert.equal(zero.dynamic_metadata ?? undefined, undefined)
    })
  })
}
