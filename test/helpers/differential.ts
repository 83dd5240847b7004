/**
 * The stores' differential property: the limit maths exists three times
 * (TypeScript for the in-process stores, Lua for Redis, PL/pgSQL for
 * PostgreSQL). Random sequences of (limit, cost, time step) of the given
 * kinds, each limit drawn from its kind's `sample.params`, run against the
 * memory, shared-memory, Redis and PostgreSQL stores (and a Redis Cluster
 * when given one) must give the same outcomes and values.
 *
 * The two in-process stores are given the same `now` and must agree
 * exactly. Redis and PostgreSQL read their own clock, so time steps are real
 * waits and those stores see each request a few milliseconds apart: a value
 * that moves with time (refill, decay) may differ by the kind's
 * `sample.drift` × that skew, and an outcome may differ only when the
 * request sits within that tolerance of the kind's `sample.edge`. Values of a
 * kind with no drift must agree to the epsilon.
 */
import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'
import fc from 'fast-check'
import type { Limit, LimitKind } from '../../src/algorithms/algorithm.js'
import type { ParamRange } from '../../src/algorithms/kinds/twins.js'
import { MemoryStore } from '../../src/store/memory/store.js'
import { RedisClusterStore } from '../../src/store/redis/cluster.js'
import { RedisStore } from '../../src/store/redis/store.js'
import { parseRedisUrl } from '../../src/store/redis/url.js'
import { SharedMemoryStore } from '../../src/store/threads/store.js'
import { SharedTable } from '../../src/store/threads/table.js'
import { applyAsync, type Check, type Outcome, type Store } from '../../src/store/store.js'
import { dropPrefix, openStore, uniquePrefix } from './postgres-db.js'
import { deleteKeys } from './redis-servers.js'

const REDIS_URL = process.env.FAIRVISOR_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379'
const EPS = 1e-9
/** Seconds by which the stores' clocks may see one request apart (scheduling on a loaded machine). */
const SKEW_S = 0.15

const param = (r: ParamRange): fc.Arbitrary<number> =>
  r.min === r.max
    ? fc.constant(r.min)
    : r.integer
      ? fc.integer({ min: r.min, max: r.max })
      : fc.double({ min: r.min, max: r.max, noNaN: true })

/** A limit of one of `kinds`, its parameters drawn from the kind's sample ranges. */
const limitOf = (kinds: readonly LimitKind[]): fc.Arbitrary<Limit> =>
  fc.constantFrom(...kinds).chain((k) => fc.tuple(...k.sample.params.map(param)).map((p) => k.limit(p)))

/** One request: its cost (whole or fractional) and the real wait before it, in ms. */
const step = fc.record({
  cost: fc.oneof(fc.integer({ min: 1, max: 6 }), fc.double({ min: 0.25, max: 4, noNaN: true })),
  waitMs: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 40 })),
})

export interface DifferentialOptions {
  /** A Redis Cluster (`redis+cluster://` URL, test/helpers/redis-servers.ts startCluster) run beside the four stores. */
  clusterUrl?: string
}

/**
 * Opens the stores (the kinds must be in the kind table: the server scripts are assembled now), runs
 * `numRuns` sequences, closes them.
 */
export async function runDifferential(kinds: readonly LimitKind[], numRuns: number, opts: DifferentialOptions = {}): Promise<void> {
  const keyPrefix = `diff-${process.pid}-${Date.now().toString(36)}`
  const pgPrefix = uniquePrefix('diff')
  const memory = new MemoryStore({ maxBytes: 16 << 20, clock: Date.now })
  const shared = new SharedMemoryStore({ table: SharedTable.create(16 << 20), clock: Date.now })
  const redis = new RedisStore({ target: parseRedisUrl(REDIS_URL), timeoutMs: 2000 })
  const stores: Store[] = [memory, shared, redis]
  /** The stores on a server's clock, by name, compared with the memory store. */
  const remote: [string, Store][] = [['redis', redis]]
  let run = 0
  try {
    if (!(await redis.ready(3000))) throw new Error(`no Redis at ${REDIS_URL}`)
    if (opts.clusterUrl !== undefined) {
      const cluster = new RedisClusterStore({ target: parseRedisUrl(opts.clusterUrl), timeoutMs: 2000 })
      stores.push(cluster)
      remote.push(['redis-cluster', cluster])
      if (!(await cluster.ready(5000))) throw new Error(`no Redis Cluster at ${opts.clusterUrl}`)
    }
    const postgres = await openStore(pgPrefix)
    stores.push(postgres)
    remote.push(['postgres', postgres])
    await fc.assert(
      fc.asyncProperty(limitOf(kinds), fc.array(step, { minLength: 1, maxLength: 12 }), async (limit, steps) => {
        const k = limit.kind
        const key = `${k.name}:${keyPrefix}-${run++}`
        const drift = k.sample.drift(limit)
        const tolerance = drift * SKEW_S + EPS
        for (const [i, s] of steps.entries()) {
          if (s.waitMs > 0) await sleep(s.waitMs)
          const check: Check = { key, limit, cost: s.cost, shadow: false }
          const now = Date.now() / 1000
          const [m, sh, ...others] = await Promise.all(stores.map(async (store) => (await applyAsync(store, [check], now))[0]!))
          const where = `${k.name} ${JSON.stringify(limit.params)}, step ${i} (cost ${s.cost})`
          assert.deepEqual(sh, m, `${where}: shared memory and memory on the same clock`)
          // `remote` is in the order of stores[2…].
          for (const [name, o] of remote.map(([n], j) => [n, others[j]!] as [string, Outcome])) {
            assert.ok(
              Math.abs(o.value - m!.value) <= tolerance + (o.allowed !== m!.allowed ? s.cost : 0),
              `${where}: ${name} value ${o.value}, memory ${m!.value}`,
            )
            if (o.allowed !== m!.allowed) {
              // Only a request whose cost sits at the edge of what is left may go either way.
              assert.ok(
                drift > 0,
                `${where}: ${name} ${o.allowed ? 'allowed' : 'rejected'} what memory ${m!.allowed ? 'allowed' : 'rejected'}`,
              )
              const edge = k.sample.edge(limit, m!, s.cost)
              assert.ok(edge <= tolerance, `${where}: ${name} and memory disagree ${edge} from the edge`)
              return // the stores' states now differ by one request: the rest of the sequence proves nothing
            }
          }
        }
      }),
      { numRuns },
    )
  } finally {
    await Promise.all(stores.map((s) => s.close()))
    await Promise.all([deleteKeys(REDIS_URL, `*${keyPrefix}*`), dropPrefix(pgPrefix)])
  }
}
