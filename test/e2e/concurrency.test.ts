/**
 * `"algorithm": "concurrency"` through the real gateway, against a backend
 * that counts the requests it holds at once:
 * - 40 clients on one key of `max_concurrent: 5`, each request held 300 ms:
 *   the backend never holds more than 5, rejects are 429
 *   concurrency_exceeded with RateLimit-Limit 5, RateLimit-Remaining 0 and a
 *   jittered Retry-After of 1–2 s;
 * - 5 clients holding every slot abort mid-request: once their exchanges
 *   have ended (the backend saw them go, the gateways counted the give-backs),
 *   5 new requests pass at once;
 * on the in-process store with 2 worker threads (the shared table), and on
 * Redis with two gateway processes. Then on Redis and on PostgreSQL, a
 * gateway killed with SIGKILL while holding all 5 slots: they are free again
 * for the other gateway within `lease_seconds` (2 s), not before two thirds
 * of it, while the other gateway's requests keep taking and giving back slots.
 * And on the in-process store, the slots of worker threads killed while
 * holding them are free again within their lease for the workers started
 * in their place.
 *
 * Each case has its own backend (its count of requests held), gateways and
 * store (its own Redis server, its own PostgreSQL tables), so the cases of
 * each group run at once: the two under 40 clients' load, then the three
 * whose time is mostly a lease running out. Not the two groups together:
 * a lease's start is read in this process, which the load keeps busy.
 */
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { after, describe, it } from 'node:test'
import { Pool } from 'undici'
import { metricValue, startBackend, startGateway, type Backend, type GatewayProcess } from '../helpers/processes.js'
import { dropPrefix, PG_URL, uniquePrefix } from '../helpers/postgres-db.js'
import { startRedis, type RedisServer } from '../helpers/redis-servers.js'
import { waitFor } from '../helpers/wait.js'
import { startBuiltSupervisor } from '../helpers/supervisor.js'

const MAX = 5
const HOLD_MS = 300
const LEASE_S = 2
const CLIENTS = 40
/** A lease bucket's expiry margin (a thousandth of a bucket) and the store server's clock read a moment later. */
const SLACK_S = 0.05

/** A backend that holds each request 300 ms (`x-hold: open`: until its connection closes; `x-hold: 0`: not at all), counting them. */
interface CountingBackend {
  backend: Backend
  active: number
  max: number
}

async function countingBackend(): Promise<CountingBackend> {
  const c = { active: 0, max: 0 } as CountingBackend
  c.backend = await startBackend((req, res) => {
    c.active++
    if (c.active > c.max) c.max = c.active
    res.once('close', () => c.active--)
    const hold = req.headers['x-hold']
    if (hold === 'open') return
    if (hold === '0') return void res.end('ok')
    setTimeout(() => res.end('ok'), HOLD_MS)
  })
  return c
}

function writeBundle(dir: string, leaseS = LEASE_S): string {
  const file = join(dir, `bundle-${leaseS}.json`)
  const rule = {
    name: 'in_flight',
    limit_keys: ['header:x-tenant'],
    algorithm: 'concurrency',
    algorithm_config: { max_concurrent: MAX, lease_seconds: leaseS },
  }
  writeFileSync(
    file,
    JSON.stringify({ bundle_version: 1, policies: [{ id: 'api', spec: { selector: { pathPrefix: '/' }, rules: [rule] } }] }),
  )
  return file
}

interface Answer {
  status: number
  headers: Record<string, string | string[] | undefined>
}

async function send(pool: Pool, hold?: string, signal?: AbortSignal): Promise<Answer> {
  const r = await pool.request({
    path: '/work',
    method: 'GET',
    headers: { 'x-tenant': 'acme', ...(hold === undefined ? {} : { 'x-hold': hold }) },
    signal,
  })
  await r.body.dump()
  return { status: r.statusCode, headers: r.headers }
}

/** Give-backs the gateways have had answered (summed over their worker threads). */
async function released(gws: Pick<GatewayProcess, 'url'>[]): Promise<number> {
  let n = 0
  for (const gw of gws) n += (await metricValue(gw as GatewayProcess, 'fairvisor_concurrency_releases_total', 'result="released"')) ?? 0
  return n
}

async function inFlight(gws: GatewayProcess[]): Promise<number> {
  let n = 0
  for (const gw of gws) n += (await metricValue(gw, 'fairvisor_concurrency_in_flight', 'policy="api"')) ?? 0
  return n
}

/** 40 clients for 2 s, then 5 aborted holders: the two checks of the header, on the gateways given. */
async function slotsHold(b: CountingBackend, gws: GatewayProcess[]): Promise<void> {
  const pools = gws.map((gw) => new Pool(gw.url, { connections: CLIENTS }))
  try {
    let ok = 0
    let rejected = 0
    const other: number[] = []
    const deadline = performance.now() + 2000
    await Promise.all(
      Array.from({ length: CLIENTS }, async (_, i) => {
        while (performance.now() < deadline) {
          const a = await send(pools[i % pools.length]!)
          if (a.status === 200) ok++
          else if (a.status === 429) {
            rejected++
            assert.equal(a.headers['x-fairvisor-reason'], 'concurrency_exceeded')
            assert.equal(a.headers['ratelimit-limit'], String(MAX))
            assert.equal(a.headers['ratelimit-remaining'], '0')
            assert.ok(['1', '2'].includes(String(a.headers['retry-after'])), `Retry-After ${a.headers['retry-after']}`)
            // Load shaping, not a wait for a condition: a rejected client does not spin.
            await new Promise((r) => setTimeout(r, 20))
          } else other.push(a.status)
        }
      }),
    )
    console.log(`${CLIENTS} clients: ${ok} passed, ${rejected} rejected, at most ${b.max} at the backend at once`)
    assert.deepEqual(other, [])
    assert.ok(b.max <= MAX, `the backend held ${b.max} at once`)
    assert.ok(ok >= 10 && rejected > 0, `${ok} passed, ${rejected} rejected`)
    await waitFor(() => b.active === 0, 'the load drained')
    await waitFor(async () => (await released(gws)) >= ok, 'every passed request’s slot given back')

    // Five holders, each on its own connection, held by the backend until they go.
    const holders = Array.from({ length: MAX }, () => new AbortController())
    const held = holders.map((h, i) => send(pools[i % pools.length]!, 'open', h.signal).catch(() => undefined))
    await waitFor(() => b.active === MAX, 'every slot held at the backend')
    await waitFor(async () => (await inFlight(gws)) === MAX, 'the gateways count 5 requests holding slots')
    assert.equal((await send(pools[0]!, '0')).status, 429, 'a sixth request finds no slot')
    const before = await released(gws)
    for (const h of holders) h.abort()
    await Promise.all(held)
    await waitFor(() => b.active === 0, 'the backend saw the holders go')
    await waitFor(async () => (await released(gws)) >= before + MAX, 'the gateways gave the 5 slots back')
    b.max = 0
    const five = await Promise.all(Array.from({ length: MAX }, (_, i) => send(pools[i % pools.length]!)))
    assert.deepEqual(
      five.map((a) => a.status),
      Array(MAX).fill(200),
      '5 new requests pass at once',
    )
    assert.ok(b.max <= MAX, `the backend held ${b.max} at once`)
    await waitFor(async () => (await inFlight(gws)) === 0, 'no slot held once every exchange ended')
  } finally {
    await Promise.all(pools.map((p) => p.destroy()))
  }
}

/**
 * Probes `pool` (steady traffic: each probe takes a slot when one is free and gives it back at once) until one
 * slot is free, then until all 5 are (5 requests held together at the backend all pass): ms after `taken` of each,
 * and when the last probe that found a slot still taken began. Slots taken together may straddle a lease
 * bucket's boundary, and then free a bucket apart. Before each probe the gateways have given back every slot
 * the probes before it took (`released`, the gateways' count), so a probe is refused only by the slots of the
 * requests held when `taken` was read; a machine too busy to probe before the lease ends only probes later.
 */
async function freedAfter(pool: Pool, taken: number, released: () => Promise<number>): Promise<[number, number, number]> {
  let passed = await released()
  let lastRefusedMs = 0
  const probe = async (n: number, hold?: string): Promise<boolean> => {
    const given = passed
    await waitFor(async () => (await released()) >= given, 'the probes’ slots given back before the next probe')
    const began = performance.now() - taken
    const answers = await Promise.all(Array.from({ length: n }, () => send(pool, hold)))
    passed += answers.filter((a) => a.status === 200).length
    const free = answers.every((a) => a.status === 200)
    if (!free) lastRefusedMs = began
    return free
  }
  await waitFor(() => probe(1, '0'), 'a slot free again', 15_000, 25)
  const first = performance.now() - taken
  await waitFor(() => probe(MAX), 'every slot free again', 15_000, 25)
  return [first, performance.now() - taken, lastRefusedMs]
}

const dir = mkdtempSync(join(tmpdir(), 'fv-concurrency-'))
const file = writeBundle(dir)
const env = (b: CountingBackend): Record<string, string> => ({
  FAIRVISOR_BACKEND_URL: b.backend.url,
  FAIRVISOR_CONFIG_FILE: file,
  FAIRVISOR_STORE_TIMEOUT_MS: '2000',
  FAIRVISOR_FAIL_POLICY: 'closed',
})
/** Closed after the file: each case's backend and Redis server. */
const backends: CountingBackend[] = []
const redises: RedisServer[] = []
async function ownBackend(): Promise<CountingBackend> {
  const b = await countingBackend()
  backends.push(b)
  return b
}
async function ownRedis(): Promise<RedisServer> {
  const r = await startRedis()
  redises.push(r)
  return r
}

after(async () => {
  await Promise.all([...backends.map((b) => b.backend.close()), ...redises.map((r) => r.stop())])
  rmSync(dir, { recursive: true, force: true })
})

describe('the concurrency algorithm through the gateway', () => {
  describe('concurrency: at most max_concurrent at the backend, slots back when exchanges end', { concurrency: true }, () => {
    it('in-process store, 2 worker threads', async () => {
      const b = await ownBackend()
      const gw = await startGateway({ ...env(b), FAIRVISOR_WORKERS: '2' })
      try {
        await slotsHold(b, [gw])
      } finally {
        await gw.stop()
      }
    })

    it('Redis, two gateway processes', async () => {
      const b = await ownBackend()
      const redis = await ownRedis()
      const gws = await Promise.all([
        startGateway({ ...env(b), FAIRVISOR_STORE: redis.url }),
        startGateway({ ...env(b), FAIRVISOR_STORE: redis.url }),
      ])
      try {
        await slotsHold(b, gws)
      } finally {
        await Promise.all(gws.map((g) => g.stop()))
      }
    })
  })

  describe('a holder that dies: its slots free again within lease_seconds', { concurrency: true }, () => {
    for (const name of ['Redis', 'PostgreSQL'] as const) {
      it(`${name}: the slots of a gateway killed with SIGKILL are free again within lease_seconds, while the other keeps serving`, async () => {
        const b = await ownBackend()
        const prefix = uniquePrefix('cc')
        const store =
          name === 'Redis' ? { FAIRVISOR_STORE: (await ownRedis()).url } : { FAIRVISOR_STORE: PG_URL, FAIRVISOR_PG_TABLE_PREFIX: prefix }
        // One after the other: the first creates the PostgreSQL schema.
        const dead = await startGateway({ ...env(b), ...store })
        const live = await startGateway({ ...env(b), ...store })
        const toDead = new Pool(dead.url, { connections: MAX })
        const toLive = new Pool(live.url, { connections: MAX })
        try {
          const held = Array.from({ length: MAX }, () => send(toDead, 'open').catch(() => undefined))
          await waitFor(() => b.active === MAX, 'every slot held at the backend through the gateway to be killed')
          const taken = performance.now()
          dead.proc.kill('SIGKILL')
          await dead.exited
          await Promise.all(held)
          await waitFor(() => b.active === 0, 'the backend saw the dead gateway’s requests go')
          assert.equal((await send(toLive, '0')).status, 429, 'the dead gateway’s slots are still taken')
          // Steady traffic on the live gateway meanwhile: each probe takes a slot when one is free and gives it back.
          const [firstMs, allMs, refusedMs] = await freedAfter(toLive, taken, () => released([live]))
          console.log(
            `${name}: slots of the killed gateway free again ${firstMs.toFixed(0)}–${allMs.toFixed(0)} ms after they were taken (lease ${LEASE_S} s), last refused probe ${refusedMs.toFixed(0)} ms`,
          )
          assert.ok(firstMs >= ((2 / 3) * LEASE_S - 0.2) * 1000, `held at least two thirds of the lease: ${firstMs} ms`)
          assert.ok(refusedMs <= (LEASE_S + SLACK_S) * 1000, `all free within the lease: a probe begun ${refusedMs} ms after was refused`)
        } finally {
          await Promise.all([toDead.destroy(), toLive.destroy()])
          await Promise.all([dead.stop(), live.stop()])
          if (name === 'PostgreSQL') await dropPrefix(prefix)
        }
      })
    }

    it('in-process store, 2 workers: the slots of worker threads killed while holding them are free again within lease_seconds', async () => {
      const b = await ownBackend()
      const leaseS = 6 // killing and restarting two workers takes a while on a busy machine
      const sup = await startBuiltSupervisor({ ...env(b), FAIRVISOR_CONFIG_FILE: writeBundle(dir, leaseS) })
      const url = `http://127.0.0.1:${sup.port}`
      // A connection per holder, so the kernel spreads them over both workers.
      const holders = Array.from({ length: MAX }, () => new Pool(url, { connections: 1 }))
      const probe = new Pool(url, { connections: MAX })
      try {
        const held = holders.map((p) => send(p, 'open').catch(() => undefined))
        await waitFor(() => b.active === MAX, 'every slot held at the backend')
        const taken = performance.now()
        // Both at once: killed one after the other, the second would keep renewing its slots while the first restarts.
        await Promise.all([sup.kill(1), sup.kill(2)])
        await Promise.all(held)
        await waitFor(() => b.active === 0, 'the backend saw the killed workers’ requests go')
        if (performance.now() - taken < (2 / 3) * leaseS * 1000 - 200)
          assert.equal((await send(probe, '0')).status, 429, 'the killed workers’ slots are still taken')
        const [firstMs, allMs, refusedMs] = await freedAfter(probe, taken, () => released([{ url }]))
        console.log(
          `slots of the killed workers free again ${firstMs.toFixed(0)}–${allMs.toFixed(0)} ms after they were taken (lease ${leaseS} s), last refused probe ${refusedMs.toFixed(0)} ms`,
        )
        assert.ok(firstMs >= ((2 / 3) * leaseS - 0.2) * 1000, `held at least two thirds of the lease: ${firstMs} ms`)
        assert.ok(refusedMs <= (leaseS + SLACK_S) * 1000, `all free within the lease: a probe begun ${refusedMs} ms after was refused`)
      } finally {
        await Promise.all([...holders, probe].map((p) => p.destroy()))
        await sup.stop('test done')
      }
    })
  })
})
