/**
 * ShouldRateLimit with its store gone, through the real gateway process on a
 * Redis and a PostgreSQL of the test's own (killed with SIGKILL, then started
 * again), with one thread and with two workers: each call is answered gRPC
 * UNKNOWN with the store's error, as envoyproxy/ratelimit answers a Redis
 * error (Envoy's failure_mode_deny decides), for the configuration's limits
 * and for a bundle's on the descriptors alike; ext_authz and the HTTP
 * decision API keep the fail policy (open here); the gateway keeps serving
 * (gRPC health, /livez); once the store is back, calls are answered with
 * their limits again. `FAIRVISOR_RLS_STORE_FAILURE=policy` (the fail policy's
 * statuses) is in grpc-redis.test.ts.
 */
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import type { ServiceError } from '@grpc/grpc-js'
import { checkRequest, grpcClients, type GrpcClients } from '../helpers/grpc-client.js'
import { metricValue, startGateway, type GatewayProcess } from '../helpers/processes.js'
import { startPostgres } from '../helpers/postgres-servers.js'
import { startRedis } from '../helpers/redis-servers.js'

const LIMIT = 50
const OK = 1
const UNKNOWN = 2
/** Connections to the gateway: with two workers, calls reach both. */
const CLIENTS = 4

interface Store {
  url: string
  kill(): Promise<void>
  restart(): Promise<void>
  stop(): Promise<void>
}

const STORES: Array<[string, () => Promise<Store>]> = [
  ['Redis', startRedis],
  ['PostgreSQL', startPostgres],
]

function writeConfig(dir: string): { bundle: string; rls: string } {
  const bundle = join(dir, 'bundle.json')
  const bucket = { algorithm: 'token_bucket', algorithm_config: { tokens_per_second: 0.0001, burst: LIMIT } }
  writeFileSync(
    bundle,
    JSON.stringify({
      bundle_version: 1,
      policies: [
        // ext_authz and the decision API.
        { id: 'api', spec: { selector: { pathPrefix: '/work' }, rules: [{ name: 'per_user', limit_keys: ['header:x-user'], ...bucket }] } },
        // RLS calls of the domain `bundled`, which the RLS configuration does not have: the bundle alone limits them.
        {
          id: 'bundled',
          spec: { selector: { pathExact: '/bundled' }, rules: [{ name: 'per_user', limit_keys: ['descriptor:user'], ...bucket }] },
        },
      ],
    }),
  )
  const rls = join(dir, 'rls.yaml')
  writeFileSync(rls, `domain: outage\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: ${LIMIT}}\n`)
  return { bundle, rls }
}

const call = (domain: string, user: string) => ({ domain, descriptors: [{ entries: [{ key: 'user', value: user }] }] })

async function refused(p: Promise<unknown>): Promise<ServiceError> {
  return p.then(
    (r) => assert.fail(`answered ${JSON.stringify(r)}`),
    (err: ServiceError) => err,
  )
}

/** One call per client (each its own connection) until every one is answered OK: the store is back for every thread. */
async function answeredAgain(cs: GrpcClients[], domain: string, user: string, withinMs: number): Promise<number> {
  const t0 = Date.now()
  for (let tries = 1; ; tries++) {
    const got = await Promise.allSettled(cs.map((c) => c.shouldRateLimit(call(domain, user))))
    if (got.every((g) => g.status === 'fulfilled' && g.value.overall_code === OK)) return tries
    if (Date.now() - t0 > withinMs)
      assert.fail(
        `not answered within ${withinMs} ms of the restart: ${JSON.stringify(got.map((g) => (g.status === 'fulfilled' ? g.value : g.reason.details)))}`,
      )
    // The store's reconnection is its own timer: give it a moment rather than spin on it.
    await new Promise((r) => setTimeout(r, 50))
  }
}

for (const [name, startStore] of STORES) {
  for (const workers of ['1', '2']) {
    describe(`ShouldRateLimit with ${name} down, ${workers} worker${workers === '1' ? '' : 's'}`, () => {
      let dir: string
      let store: Store
      let gw: GatewayProcess
      let cs: GrpcClients[]
      before(async () => {
        dir = mkdtempSync(join(tmpdir(), 'fv-rls-outage-'))
        store = await startStore()
        const { bundle, rls } = writeConfig(dir)
        gw = await startGateway(
          {
            FAIRVISOR_MODE: 'decision_service',
            FAIRVISOR_GRPC_PORT: '0',
            FAIRVISOR_STORE: store.url,
            FAIRVISOR_CONFIG_FILE: bundle,
            FAIRVISOR_RLS_CONFIG: rls,
            FAIRVISOR_FAIL_POLICY: 'open',
            FAIRVISOR_STORE_TIMEOUT_MS: '500',
            FAIRVISOR_WORKERS: workers,
          },
          { timeoutMs: 30_000 },
        )
        const line = await gw.waitForLog((l) => typeof l.msg === 'string' && l.msg.startsWith('fairvisor listening'))
        cs = Array.from({ length: CLIENTS }, () => grpcClients(line.grpcPort as number))
      })
      after(async () => {
        for (const c of cs ?? []) c.close()
        await gw?.stop()
        await store?.stop()
        rmSync(dir, { recursive: true, force: true })
      })

      test('answered UNKNOWN with the store error (RLS limits and bundle alike), ext_authz and HTTP fail open, answered again once the store is back', async () => {
        const [c] = cs as [GrpcClients]
        const up = await c.shouldRateLimit(call('outage', 'u'))
        assert.equal(up.overall_code, OK)
        assert.equal(up.statuses[0].limit_remaining, LIMIT - 1)
        assert.equal((await c.shouldRateLimit(call('bundled', 'u'))).overall_code, OK)

        await store.kill()
        const messages = new Set<string>()
        for (const domain of ['outage', 'bundled']) {
          const errs = await Promise.all(cs.map((x) => refused(x.shouldRateLimit(call(domain, 'u')))))
          for (const err of errs) {
            assert.equal(err.code, UNKNOWN, `${domain}: ${err.message}`)
            assert.match(err.details, /^rate limit store unavailable: \S/)
            messages.add(err.details)
          }
        }
        // The fail policy still answers everything else: open.
        const authz = await c.check(checkRequest({ path: '/work', headers: { 'x-user': 'u' } }))
        assert.equal(authz.http_response, 'ok_response')
        const http = await fetch(`${gw.url}/v1/decision`, {
          method: 'POST',
          headers: { 'x-original-method': 'GET', 'x-original-uri': '/work', 'x-user': 'u' },
        })
        assert.equal(http.status, 200)
        // Serving: health, liveness.
        assert.equal((await c.healthCheck('ratelimit')).status, 1) // SERVING
        assert.equal((await fetch(`${gw.url}/livez`)).status, 200)
        // Counted per domain (the bundle's is not a configured one), whichever thread answered.
        assert.equal(await metricValue(gw, 'fairvisor_rls_decisions_total', 'domain="outage",code="store_error"'), CLIENTS)
        assert.equal(await metricValue(gw, 'fairvisor_rls_decisions_total', 'domain="_unknown",code="store_error"'), CLIENTS)
        assert.equal(await metricValue(gw, 'fairvisor_rls_decisions_total', 'code="store_failed'), undefined)

        await store.restart()
        const tries = await answeredAgain(cs, 'outage', 'v', 15_000)
        const again = await c.shouldRateLimit(call('outage', 'v'))
        assert.equal(again.overall_code, OK)
        assert.equal(again.statuses[0].current_limit.requests_per_unit, LIMIT)
        assert.ok(again.statuses[0].limit_remaining < LIMIT - CLIENTS, `counted again: ${again.statuses[0].limit_remaining} left`)
        assert.equal((await c.shouldRateLimit(call('bundled', 'v'))).overall_code, OK)
        console.log(
          `${name}, ${workers} worker(s): ${JSON.stringify([...messages])}; answered again after ${tries} round(s) of ${CLIENTS} calls`,
        )
      })
    })
  }
}
