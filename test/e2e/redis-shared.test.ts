/**
 * Limits stay exact across gateway instances: two gateway processes
 * share one Redis (then one 3-master Redis Cluster); 64 keep-alive clients,
 * split across them, hammer one key of a `burst 10, tokens_per_second 10`
 * bucket for 3 s. The backend must see at most 10 + 10 × elapsed requests and
 * no fewer than that minus 2. Heavy: run under `flock /tmp/fv-heavy.lock`.
 */
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { describe, it } from 'node:test'
import { Pool } from 'undici'
import { startBackend, startGateway, type GatewayProcess } from '../helpers/processes.js'
import { writeHeaderBucketBundle } from '../helpers/bundles.js'
import { startCluster, startRedis } from '../store/redis-servers.js'

const CLIENTS = 64
const DURATION_MS = 3000

function bundleFile(rule: string): { file: string; dir: string } {
  const dir = mkdtempSync(join(tmpdir(), 'fv-redis-shared-'))
  return { dir, file: writeHeaderBucketBundle(dir, rule, { burst: 10, tokens_per_second: 10 }) }
}

async function hammer(storeUrl: string): Promise<void> {
  const { file, dir } = bundleFile('shared_key')
  const backend = await startBackend()
  // Exactness, not the deadline, is under test here: a generous deadline keeps a
  // loaded 2-core machine from turning slow calls into fail-open grants.
  const env = { FAIRVISOR_BACKEND_URL: backend.url, FAIRVISOR_CONFIG_FILE: file, FAIRVISOR_STORE: storeUrl, FAIRVISOR_REDIS_TIMEOUT_MS: '2000', FAIRVISOR_FAIL_POLICY: 'closed' }
  const gws: GatewayProcess[] = []
  const pools: Pool[] = []
  try {
    gws.push(await startGateway(env), await startGateway(env))
    for (const gw of gws) pools.push(new Pool(gw.url, { connections: CLIENTS / 2, pipelining: 1 }))
    const statuses = new Map<number, number>()
    const perGateway = [0, 0]
    const t0 = performance.now()
    const deadline = t0 + DURATION_MS
    const client = async (i: number): Promise<void> => {
      const g = i % 2
      while (performance.now() < deadline) {
        const r = await pools[g]!.request({ path: '/work', method: 'GET', headers: { 'x-user': 'shared' } })
        await r.body.dump()
        statuses.set(r.statusCode, (statuses.get(r.statusCode) ?? 0) + 1)
        if (r.statusCode === 200) perGateway[g]!++
      }
    }
    await Promise.all(Array.from({ length: CLIENTS }, (_, i) => client(i)))
    const elapsedS = (performance.now() - t0) / 1000
    const allowed = statuses.get(200) ?? 0
    const total = [...statuses.values()].reduce((a, b) => a + b, 0)
    const ceiling = 10 + 10 * elapsedS
    const detail = `backend ${backend.count}, allowed per gateway ${perGateway.join('+')}, total ${total}, elapsed ${elapsedS.toFixed(3)} s, ceiling ${ceiling.toFixed(2)}, statuses ${JSON.stringify([...statuses])}`
    console.log(detail)
    assert.deepEqual([...statuses.keys()].sort(), [200, 429], detail)
    assert.ok(total > 1000, `the load actually hammered the gateways: ${detail}`)
    assert.ok(perGateway[0]! > 0 && perGateway[1]! > 0, `both gateways granted requests: ${detail}`)
    assert.equal(backend.count, allowed, detail)
    assert.ok(backend.count <= ceiling, `over-grant: ${detail}`)
    assert.ok(backend.count >= ceiling - 2, `under-grant: ${detail}`)
    for (const gw of gws) assert.equal(gw.logs.filter((l) => l.msg === 'store call failed').length, 0, 'no store errors')
  } finally {
    await Promise.all(pools.map((p) => p.close()))
    await Promise.all(gws.map((g) => g.stop()))
    await backend.close()
    rmSync(dir, { recursive: true, force: true })
  }
}

describe('two gateways share one limit', () => {
  it(`standalone Redis: ${CLIENTS} clients on one key for ${DURATION_MS / 1000} s stay within [10 + 10 × elapsed − 2, 10 + 10 × elapsed]`, async () => {
    const redis = await startRedis()
    try {
      await hammer(redis.url)
    } finally {
      await redis.stop()
    }
  })

  it(`Redis Cluster (3 masters): the same bound`, async () => {
    const cluster = await startCluster()
    try {
      await hammer(cluster.url)
    } finally {
      await cluster.stop()
    }
  })
})
