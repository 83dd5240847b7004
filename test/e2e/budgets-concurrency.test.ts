/**
 * No over-spend of a budget under concurrency (docs/behaviour.md §5 cost_based): 64
 * keep-alive clients on one budget key, with costs from a header that vary
 * per request, (a) split across two gateway processes on one Redis (a
 * redis-server this file owns), (b) on one gateway with the in-process store.
 *
 * - exhaust: far more cost is asked than the budget holds; the cost the
 *   backend received (sum of X-Cost of the requests it saw) must equal the
 *   budget exactly: never above (0.00 % over-spend), and not below either,
 *   since every client ends on cost-1 requests that fill the last units;
 * - partly used: small requests plus one 2000-cost request per client
 *   against a budget of 3000, so exactly one large request fits and the rest
 *   are rejected; the usage left must equal exactly the accepted cost (a
 *   rejected request leaves no increment): read from the Redis counter, and
 *   from RateLimit-Remaining of one more request.
 *
 * Heavy: run under `flock /tmp/fv-heavy.lock`.
 */
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { Redis } from 'ioredis'
import { Pool } from 'undici'
import { startBackend, startGateway, type Backend, type GatewayProcess } from '../helpers/processes.js'
import { startRedis, type RedisServer } from '../helpers/redis-servers.js'

const CLIENTS = 64
const EXHAUST_BUDGET = 1000
const PARTLY_BUDGET = 3000
const BIG = 2000

const dir = mkdtempSync(join(tmpdir(), 'fv-budgets-conc-'))
after(() => rmSync(dir, { recursive: true, force: true }))

function bundleFile(): string {
  const rule = (name: string, budget: number): object => ({
    name,
    limit_keys: ['header:x-tenant'],
    algorithm: 'cost_based',
    algorithm_config: {
      budget,
      period: '1d',
      cost_key: 'header:x-cost',
      staged_actions: [
        { threshold_percent: 80, action: 'warn' },
        { threshold_percent: 100, action: 'reject' },
      ],
    },
  })
  const file = join(dir, 'bundle.json')
  writeFileSync(
    file,
    JSON.stringify({
      bundle_version: 1,
      policies: [
        { id: 'exhaust', spec: { selector: { pathPrefix: '/exhaust/' }, rules: [rule('spend_exhaust', EXHAUST_BUDGET)] } },
        { id: 'partly', spec: { selector: { pathPrefix: '/partly/' }, rules: [rule('spend_partly', PARTLY_BUDGET)] } },
      ],
    }),
  )
  return file
}

/** Cost the backend received per tenant (the gateway forwards only accepted requests). */
const received = new Map<string, number>()
let backend: Backend
before(async () => {
  backend = await startBackend((req, res) => {
    const tenant = String(req.headers['x-tenant'])
    received.set(tenant, (received.get(tenant) ?? 0) + Number(req.headers['x-cost']))
    res.end('ok')
  })
})
after(() => backend.close())

/** If the UTC day ends within a minute, wait for the next one (the budgets are per day). */
async function awayFromMidnight(): Promise<void> {
  const left = 86_400 - ((Date.now() / 1000) % 86_400)
  if (left < 60) await sleep((left + 1) * 1000)
}

interface Run {
  statuses: Map<number, number>
  /** Cost of the requests answered 200, as the clients saw it. */
  acceptedCost: number
}

/** CLIENTS clients, client i on pools[i % pools.length], each sending costs(i) in order. */
async function drive(pools: Pool[], path: string, tenant: string, costs: (client: number) => number[]): Promise<Run> {
  const statuses = new Map<number, number>()
  let acceptedCost = 0
  await Promise.all(
    Array.from({ length: CLIENTS }, async (_, i) => {
      const pool = pools[i % pools.length]!
      for (const cost of costs(i)) {
        const r = await pool.request({ path, method: 'GET', headers: { 'x-tenant': tenant, 'x-cost': String(cost) } })
        await r.body.dump()
        statuses.set(r.statusCode, (statuses.get(r.statusCode) ?? 0) + 1)
        if (r.statusCode === 200) acceptedCost += cost
      }
    }),
  )
  return { statuses, acceptedCost }
}

const SMALL = [1, 2, 3, 5, 7, 11]

async function exhaust(pools: Pool[], tenant: string): Promise<number> {
  // 36 costs from SMALL per client (≈ 64 × 36 × 4.8 ≈ 11 000 asked of 1000), then 4 of cost 1.
  const run = await drive(pools, '/exhaust/x', tenant, (i) => [
    ...Array.from({ length: 36 }, (_, k) => SMALL[(i + k) % SMALL.length]!),
    1,
    1,
    1,
    1,
  ])
  const got = received.get(tenant) ?? 0
  const detail = `backend received cost ${got}, clients saw ${run.acceptedCost} accepted, budget ${EXHAUST_BUDGET}, statuses ${JSON.stringify([...run.statuses])}`
  console.log(`exhaust: ${detail}`)
  assert.deepEqual([...run.statuses.keys()].sort(), [200, 429], detail)
  assert.equal(got, run.acceptedCost, detail)
  assert.ok(got <= EXHAUST_BUDGET, `over-spend ${(((got - EXHAUST_BUDGET) / EXHAUST_BUDGET) * 100).toFixed(2)} %: ${detail}`)
  assert.equal(got, EXHAUST_BUDGET, `the budget is spent to the last unit: ${detail}`)
  return got
}

async function partly(pools: Pool[], tenant: string): Promise<number> {
  // Per client: 6 small costs (1, 2, 3 twice: 64 × 12 = 768 in all, all fit) with one BIG among them.
  const run = await drive(pools, '/partly/x', tenant, (i) => {
    const costs = [1, 2, 3, 1, 2, 3]
    costs.splice(i % 7, 0, BIG)
    return costs
  })
  const got = received.get(tenant) ?? 0
  const detail = `backend received cost ${got}, clients saw ${run.acceptedCost} accepted, budget ${PARTLY_BUDGET}, statuses ${JSON.stringify([...run.statuses])}`
  console.log(`partly: ${detail}`)
  assert.equal(got, run.acceptedCost, detail)
  // The first BIG fits (at most 768 was used before it), a second one never does.
  assert.equal(got, 768 + BIG, detail)
  assert.equal(run.statuses.get(429), CLIENTS - 1, detail)
  return got
}

/** RateLimit-Remaining after one more request of cost 1 on `tenant`. */
async function remainingAfterOne(gw: GatewayProcess, tenant: string): Promise<number> {
  const r = await fetch(`${gw.url}/partly/x`, { headers: { 'x-tenant': tenant, 'x-cost': '1' } })
  await r.text()
  assert.equal(r.status, 200)
  return Number(r.headers.get('ratelimit-remaining'))
}

/** The count of a window counter in Redis: `<count><window start>`, two little-endian doubles. */
async function redisCount(redis: Redis, key: string): Promise<number> {
  const v = await redis.getBuffer(key)
  assert.ok(v !== null && v.length === 16, `counter ${key} present`)
  return v.readDoubleLE(0)
}

describe(`${CLIENTS} concurrent clients on one budget key: accepted cost never passes the budget, rejects leave nothing`, () => {
  it('two gateways on one Redis', async () => {
    const redis: RedisServer = await startRedis()
    const client = new Redis(redis.port, '127.0.0.1', { lazyConnect: true })
    const file = bundleFile()
    const env = {
      FAIRVISOR_BACKEND_URL: backend.url,
      FAIRVISOR_CONFIG_FILE: file,
      FAIRVISOR_STORE: redis.url,
      FAIRVISOR_REDIS_TIMEOUT_MS: '2000',
      FAIRVISOR_FAIL_POLICY: 'closed',
    }
    const gws: GatewayProcess[] = []
    const pools: Pool[] = []
    try {
      gws.push(await startGateway(env), await startGateway(env))
      for (const gw of gws) pools.push(new Pool(gw.url, { connections: CLIENTS / 2, pipelining: 1 }))
      await client.connect()
      await awayFromMidnight()
      const spent = await exhaust(pools, 'redis-a')
      assert.equal(await redisCount(client, 'cb:spend_exhaust:redis-a'), spent, 'usage in Redis = accepted cost')
      const used = await partly(pools, 'redis-b')
      assert.equal(await redisCount(client, 'cb:spend_partly:redis-b'), used, 'usage in Redis = accepted cost: no rejected increment left')
      assert.equal(await remainingAfterOne(gws[1]!, 'redis-b'), PARTLY_BUDGET - used - 1)
      for (const gw of gws) assert.equal(gw.logs.filter((l) => l.msg === 'store call failed').length, 0, 'no store errors')
    } finally {
      client.disconnect()
      await Promise.all(pools.map((p) => p.close()))
      await Promise.all(gws.map((g) => g.stop()))
      await redis.stop()
    }
  })

  it('one gateway, in-process store', async () => {
    const gw = await startGateway({ FAIRVISOR_BACKEND_URL: backend.url, FAIRVISOR_CONFIG_FILE: bundleFile() })
    const pool = new Pool(gw.url, { connections: CLIENTS, pipelining: 1 })
    try {
      await awayFromMidnight()
      await exhaust([pool], 'mem-a')
      const used = await partly([pool], 'mem-b')
      assert.equal(await remainingAfterOne(gw, 'mem-b'), PARTLY_BUDGET - used - 1, 'usage = accepted cost: no rejected increment left')
    } finally {
      await pool.close()
      await gw.stop()
    }
  })
})
