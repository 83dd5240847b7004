/**
 * Differential property test: the limit maths exists three times (TypeScript
 * for the memory store, Lua for Redis, PL/pgSQL for PostgreSQL). Random
 * sequences of (kind, parameters, cost, time step) run against all three must
 * give the same outcomes and values.
 *
 * Redis and PostgreSQL read their own clock, so time steps are real waits and
 * the three stores see each request a few milliseconds apart: a value that
 * refills with time (the token bucket) may differ by rate × that skew, and an
 * outcome may differ only when the request's cost sits within that tolerance
 * of what was left (the rate meter's spend decays likewise across a minute).
 * Counts in a window far longer than the run must agree to the epsilon.
 */
import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import fc from 'fast-check'
import type { Limit } from '../../src/algorithms/algorithm.js'
import { meterLimit } from '../../src/algorithms/rate-meter.js'
import { bucketLimit } from '../../src/algorithms/token-bucket.js'
import { counterLimit } from '../../src/algorithms/window-counter.js'
import { MemoryStore } from '../../src/store/memory/store.js'
import type { PostgresStore } from '../../src/store/postgres/store.js'
import { RedisStore } from '../../src/store/redis/store.js'
import { parseRedisUrl } from '../../src/store/redis/url.js'
import { applyAsync, type Check, type Outcome } from '../../src/store/store.js'
import { dropPrefix, openStore, uniquePrefix } from '../helpers/postgres-db.js'
import { deleteKeys } from '../helpers/redis-servers.js'

const REDIS_URL = process.env.FAIRVISOR_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379'
const EPS = 1e-9
/** Seconds by which the stores' clocks may see one request apart (scheduling on a loaded machine). */
const SKEW_S = 0.15
const keyPrefix = `diff-${process.pid}-${Date.now().toString(36)}`
const pgPrefix = uniquePrefix('diff')

let memory: MemoryStore
let redis: RedisStore
let postgres: PostgresStore

before(async () => {
  memory = new MemoryStore({ maxBytes: 16 << 20, clock: Date.now })
  redis = new RedisStore({ target: parseRedisUrl(REDIS_URL), timeoutMs: 2000 })
  if (!(await redis.ready(3000))) throw new Error(`no Redis at ${REDIS_URL}`)
  postgres = await openStore(pgPrefix)
})

after(async () => {
  await Promise.all([redis?.close(), postgres?.close(), memory?.close?.()])
  await Promise.all([deleteKeys(REDIS_URL, `*${keyPrefix}*`), dropPrefix(pgPrefix)])
})

/** A limit of one kind, with the rate at which its value may drift per second of clock skew. */
interface Kind {
  name: string
  limit: Limit
  /** How much the value may move per second (refill); 0: it must agree to the epsilon. */
  drift: number
  /** How far an outcome lies from the allow / reject boundary. */
  edge(o: Outcome, cost: number): number
}

/** Token bucket: tokens before the request against its cost. */
const bucketEdge = (o: Outcome, cost: number): number => Math.abs((o.allowed ? o.value + cost : o.value) - cost)

const kind: fc.Arbitrary<Kind> = fc.oneof(
  fc
    .record({ rate: fc.double({ min: 0.1, max: 5, noNaN: true }), burst: fc.integer({ min: 1, max: 20 }) })
    .map(({ rate, burst }) => ({ name: 'token_bucket', limit: bucketLimit(rate, burst), drift: rate, edge: bucketEdge })),
  // A window far longer than the run, counted from the first hit: time steps never cross it.
  fc
    .integer({ min: 1, max: 20 })
    .map((limit) => ({ name: 'window_counter', limit: counterLimit(limit, 3600, -1), drift: 0, edge: () => Infinity })),
  // The meter's last-minute spend decays over the minute: at most threshold / 60 per second.
  fc.integer({ min: 2, max: 30 }).map((threshold) => ({
    name: 'rate_meter',
    limit: meterLimit(threshold, 600),
    drift: threshold / 60,
    edge: (o: Outcome) => Math.abs(o.value - threshold),
  })),
)

/** One request: its cost (whole or fractional) and the real wait before it, in ms. */
const step = fc.record({
  cost: fc.oneof(fc.integer({ min: 1, max: 6 }), fc.double({ min: 0.25, max: 4, noNaN: true })),
  waitMs: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 40 })),
})

let run = 0

test('memory, Redis and PostgreSQL give the same outcomes and values for random request sequences', async () => {
  await fc.assert(
    fc.asyncProperty(kind, fc.array(step, { minLength: 1, maxLength: 12 }), async (k, steps) => {
      const key = `${k.name}:${keyPrefix}-${run++}`
      const tolerance = k.drift * SKEW_S + EPS
      for (const [i, s] of steps.entries()) {
        if (s.waitMs > 0) await sleep(s.waitMs)
        const check: Check = { key, limit: k.limit, cost: s.cost, shadow: false }
        const now = Date.now() / 1000
        const [m, r, p] = await Promise.all([memory, redis, postgres].map(async (store) => (await applyAsync(store, [check], now))[0]!))
        const where = `${k.name} ${JSON.stringify(k.limit.params)}, step ${i} (cost ${s.cost})`
        for (const [name, o] of [
          ['redis', r],
          ['postgres', p],
        ] as [string, Outcome][]) {
          assert.ok(
            Math.abs(o.value - m!.value) <= tolerance + (o.allowed !== m!.allowed ? s.cost : 0),
            `${where}: ${name} value ${o.value}, memory ${m!.value}`,
          )
          if (o.allowed !== m!.allowed) {
            // Only a request whose cost sits at the edge of what is left may go either way.
            assert.ok(
              k.drift > 0,
              `${where}: ${name} ${o.allowed ? 'allowed' : 'rejected'} what memory ${m!.allowed ? 'allowed' : 'rejected'}`,
            )
            assert.ok(k.edge(m!, s.cost) <= tolerance, `${where}: ${name} and memory disagree ${k.edge(m!, s.cost)} from the edge`)
            return // the stores' states now differ by one request: the rest of the sequence proves nothing
          }
        }
      }
    }),
    { numRuns: 40 },
  )
})
