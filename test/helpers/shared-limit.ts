/**
 * Limits stay exact across gateway instances: two gateway processes on one
 * remote store, `clients` keep-alive clients split across them, hammer one
 * key of a `burst 10, tokens_per_second 10` bucket for `durationMs` and at
 * least `minTotal` requests (a loaded machine runs longer rather than fewer).
 * The bucket refills from its first call on, which the clients can only
 * bracket: the backend must see at most 10 + 10 × the time from the first
 * request sent to the last answer, and no fewer than 10 + 10 × the time from
 * the first answer to the last request sent, minus 2 (the store saw at least
 * that much refill, and nothing is sent after). Used for every remote store
 * (Redis, Redis Cluster, PostgreSQL).
 */
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { Pool } from 'undici'
import { writeHeaderBucketBundle } from './bundles.js'
import { startBackend, startGateway, startGateways, type GatewayProcess } from './processes.js'

export interface SharedLimitOptions {
  /** FAIRVISOR_* settings naming the store (URL, prefix, …). */
  env: Record<string, string>
  clients: number
  durationMs: number
  /** Requests the load must reach for the run to count. */
  minTotal: number
  /** Start both gateways at once (schema creation races on a fresh store). */
  together?: boolean
}

/** The `burst 10, tokens_per_second 10` bucket's bounds for a run of `hammerOneKey`. */
export interface Hammered {
  statuses: Map<number, number>
  /** Requests allowed through each pool. */
  perPool: number[]
  total: number
  elapsedS: number
  /** 10 + 10 × (first request sent → last answer): every refill the store can have seen. */
  ceiling: number
  /** 10 + 10 × (first answer → last request sent) − 2: refill the store saw at least, all of it asked for. */
  floor: number
}

/**
 * `clients` keep-alive clients split across `pools` on one key (x-user: shared) of a
 * `burst 10, tokens_per_second 10` bucket, for `durationMs` and at least `minTotal` requests
 * (60 s at most).
 */
export async function hammerOneKey(pools: Pool[], o: { clients: number; durationMs: number; minTotal: number }): Promise<Hammered> {
  const statuses = new Map<number, number>()
  const perPool = pools.map(() => 0)
  const t0 = performance.now()
  const deadline = t0 + o.durationMs
  const cap = t0 + 60_000
  let total = 0
  let firstAnswer = Number.POSITIVE_INFINITY
  let lastSent = t0
  const client = async (i: number): Promise<void> => {
    const g = i % pools.length
    while ((performance.now() < deadline || total <= o.minTotal) && performance.now() < cap) {
      lastSent = performance.now()
      const r = await pools[g]!.request({ path: '/work', method: 'GET', headers: { 'x-user': 'shared' } })
      firstAnswer = Math.min(firstAnswer, performance.now())
      total++
      await r.body.dump()
      statuses.set(r.statusCode, (statuses.get(r.statusCode) ?? 0) + 1)
      if (r.statusCode === 200) perPool[g]!++
    }
  }
  await Promise.all(Array.from({ length: o.clients }, (_, i) => client(i)))
  const elapsedS = (performance.now() - t0) / 1000
  return {
    statuses,
    perPool,
    total,
    elapsedS,
    ceiling: 10 + 10 * elapsedS,
    floor: 10 + (10 * (lastSent - firstAnswer)) / 1000 - 2,
  }
}

export async function hammerSharedKey(o: SharedLimitOptions): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'fv-shared-'))
  const file = writeHeaderBucketBundle(dir, 'shared_key', { burst: 10, tokens_per_second: 10 })
  const backend = await startBackend()
  // Exactness, not the deadline, is under test here: a generous deadline keeps a
  // loaded 2-core machine from turning slow calls into fail-open grants.
  const env = {
    FAIRVISOR_BACKEND_URL: backend.url,
    FAIRVISOR_CONFIG_FILE: file,
    FAIRVISOR_STORE_TIMEOUT_MS: '2000',
    FAIRVISOR_FAIL_POLICY: 'closed',
    ...o.env,
  }
  const gws: GatewayProcess[] = []
  const pools: Pool[] = []
  try {
    if (o.together) gws.push(...(await startGateways([env, env])))
    else gws.push(await startGateway(env), await startGateway(env))
    for (const gw of gws) pools.push(new Pool(gw.url, { connections: o.clients / 2, pipelining: 1 }))
    const h = await hammerOneKey(pools, o)
    const { statuses, total, ceiling, floor } = h
    const perGateway = h.perPool
    const elapsedS = h.elapsedS
    const allowed = statuses.get(200) ?? 0
    const detail = `backend ${backend.count}, allowed per gateway ${perGateway.join('+')}, total ${total}, elapsed ${elapsedS.toFixed(3)} s, ceiling ${ceiling.toFixed(2)}, floor ${floor.toFixed(2)}, over-grant ${((Math.max(0, backend.count - ceiling) / ceiling) * 100).toFixed(2)} %, statuses ${JSON.stringify([...statuses])}`
    console.log(detail)
    assert.deepEqual([...statuses.keys()].sort(), [200, 429], detail)
    assert.ok(total > o.minTotal, `the load actually hammered the gateways: ${detail}`)
    assert.ok(perGateway[0]! > 0 && perGateway[1]! > 0, `both gateways granted requests: ${detail}`)
    assert.equal(backend.count, allowed, detail)
    assert.ok(backend.count <= ceiling, `over-grant: ${detail}`)
    assert.ok(backend.count >= floor, `under-grant (floor ${floor}): ${detail}`)
    for (const gw of gws) assert.equal(gw.logs.filter((l) => l.msg === 'store call failed').length, 0, 'no store errors')
  } finally {
    await Promise.all(pools.map((p) => p.close()))
    await Promise.all(gws.map((g) => g.stop()))
    await backend.close()
    rmSync(dir, { recursive: true, force: true })
  }
}
