// A stored window ahead of the server's clock is the current one, on PostgreSQL (PL/pgSQL twins) and Redis
// (Lua twins): what another database node, or the primary before a fail-over to a replica whose clock is
// behind, wrote for a later window or minute must not read as a window that is over. Before, the window
// counter and the rate meter reset their count then, and granted again what that window had already granted.
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { Redis } from 'ioredis'
import { meterLimit } from '../../src/algorithms/kinds/rate-meter/kind.js'
import { counterLimit } from '../../src/algorithms/kinds/window-counter/kind.js'
import type { PostgresStore } from '../../src/store/postgres/store.js'
import { RedisStore } from '../../src/store/redis/store.js'
import { parseRedisUrl } from '../../src/store/redis/url.js'
import { applyAsync, type Check, type Store } from '../../src/store/store.js'
import { dropPrefix, openStore, sql, uniquePrefix } from '../helpers/postgres-db.js'

const REDIS_URL = process.env.FAIRVISOR_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379'
const run = `${process.pid}_${Date.now().toString(36)}`

// Two minutes ahead: a later window than any the test's own clock reaches while it runs.
const AHEAD_S = 120
const counter = (key: string): Check => ({ key, limit: counterLimit(3, 60, 0), cost: 1, shadow: false })
const meter = (key: string): Check => ({ key, limit: meterLimit(5, 30), cost: 1, shadow: false })

/** A window counter full (3 of 3) and a rate meter one short of opening (4 of 5), both in the window or minute AHEAD_S from `now`. */
function aheadStates(now: number): { counter: number[]; meter: number[]; expireAt: number } {
  const start = Math.floor(now / 60) * 60 + AHEAD_S
  return { counter: [3, start], meter: [0, 4, start, 0], expireAt: start + 120 }
}

async function assertKept(store: Store, counterKey: string, meterKey: string): Promise<void> {
  const [c] = await applyAsync(store, [counter(counterKey)], 0)
  assert.deepEqual([c!.allowed, c!.value], [false, 3], `the window counter keeps the later window's count: ${JSON.stringify(c)}`)
  assert.ok(c!.retryAfter > AHEAD_S, `and waits for that window's end: ${c!.retryAfter} s`)
  const [m] = await applyAsync(store, [meter(meterKey)], 0)
  assert.equal(m!.allowed, false, `the rate meter keeps the later minute's spend (4 + 1 reaches 5): ${JSON.stringify(m)}`)
}

describe('a stored window ahead of the server clock', () => {
  describe('PostgreSQL', () => {
    const prefix = uniquePrefix('ahead')
    let store: PostgresStore
    before(async () => {
      store = await openStore(prefix)
    })
    after(async () => {
      await store.close()
      await dropPrefix(prefix)
    })

    it('keeps the count of the window counter and the spend of the rate meter', async () => {
      const [row] = await sql<{ now: number }>(`SELECT extract(epoch FROM clock_timestamp())::float8 AS now`)
      const s = aheadStates(row!.now)
      await sql(`INSERT INTO ${prefix}counters (key, s0, s1, s2, s3, expire_at) VALUES ($1, $2, $3, 0, 0, $4), ($5, $6, $7, $8, $9, $4)`, [
        `wc:${run}`,
        ...s.counter,
        s.expireAt,
        `rm:${run}`,
        ...s.meter,
      ])
      await assertKept(store, `wc:${run}`, `rm:${run}`)
    })
  })

  describe('Redis', () => {
    let redis: Redis
    let store: RedisStore
    before(async () => {
      redis = new Redis(REDIS_URL)
      store = new RedisStore({ target: parseRedisUrl(REDIS_URL), timeoutMs: 2000 })
      assert.equal(await store.ready(5000), true)
    })
    after(async () => {
      await redis.del(`fvt:ahead:wc:${run}`, `fvt:ahead:rm:${run}`)
      redis.disconnect()
      await store.close()
    })

    it('keeps the count of the window counter and the spend of the rate meter', async () => {
      const [sec, usec] = await redis.time()
      const s = aheadStates(Number(sec) + Number(usec) / 1e6)
      const pack = (xs: number[]): Buffer => Buffer.concat(xs.map((x) => Buffer.from(new Float64Array([x]).buffer)))
      await redis.set(`fvt:ahead:wc:${run}`, pack(s.counter), 'PX', 600_000)
      await redis.set(`fvt:ahead:rm:${run}`, pack(s.meter), 'PX', 600_000)
      await assertKept(store, `fvt:ahead:wc:${run}`, `fvt:ahead:rm:${run}`)
    })
  })
})
