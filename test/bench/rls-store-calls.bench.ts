/**
 * Store calls per ShouldRateLimit call, allowed and rejected, on a Redis and
 * a PostgreSQL this benchmark starts (nothing else talks to them): Redis
 * commands from INFO commandstats (EVALSHA: round trips; the commands the
 * scripts ran inside them apart), PostgreSQL statements from
 * pg_stat_statements (the gateway's top-level statements: round trips; the
 * statements run inside its functions apart). One gateway process per store
 * and charge mode (a rejected call charges every descriptor, envoyproxy/
 * ratelimit's default, or nothing with STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT),
 * called one call at a time, each on counters of its own except the one kept
 * over its limit. A rejected call is decided, charged and its counters read
 * back (every descriptor's count) in one store call: this prints what each
 * call costs.
 *
 *   npm run build && flock /tmp/fv-heavy.lock node --import tsx test/bench/rls-store-calls.bench.ts [calls=20]
 */
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import pg from 'pg'
import { grpcClients, type GrpcClients } from '../helpers/grpc-client.js'
import { startPostgres, type PgServer } from '../helpers/postgres-servers.js'
import { startRedis, type RedisServer } from '../helpers/redis-servers.js'
import { commandStats, freePort, median, startGatewayProcess, stopAll, table, tempDir } from './lib.js'

const CALLS = Number(process.argv[2] ?? 20)
const dir = tempDir('fv-bench-rls-store-calls-')
const rls = join(dir, 'rls.yaml')
// `big` never goes over; `one` allows one request an hour, so a value once charged stays over.
writeFileSync(
  rls,
  'domain: bench\ndescriptors:\n  - key: big\n    rate_limit: {unit: hour, requests_per_unit: 1000000}\n  - key: one\n    rate_limit: {unit: hour, requests_per_unit: 1}\n',
)

type Entry = [key: 'big' | 'one', value: string]
interface Case {
  name: string
  /** The descriptors of call `i` (fresh values per call except the ones kept over). */
  descriptors(i: number): Entry[]
}

let run = 0
const CASES: Case[] = [
  { name: 'allowed, 1 descriptor', descriptors: (i) => [['big', `a${run}-${i}`]] },
  {
    name: 'allowed, 3 descriptors',
    descriptors: (i) => [
      ['big', `b${run}-${i}-0`],
      ['big', `b${run}-${i}-1`],
      ['big', `b${run}-${i}-2`],
    ],
  },
  { name: 'rejected, 1 descriptor over', descriptors: () => [['one', `over${run}`]] },
  {
    name: 'rejected, 3 descriptors, the first over',
    descriptors: (i) => [
      ['one', `over${run}`],
      ['big', `c${run}-${i}-1`],
      ['big', `c${run}-${i}-2`],
    ],
  },
  {
    name: 'rejected, 3 descriptors, the last over',
    descriptors: (i) => [
      ['big', `d${run}-${i}-0`],
      ['big', `d${run}-${i}-1`],
      ['one', `over${run}`],
    ],
  },
  {
    name: 'rejected, 3 descriptors, all over',
    descriptors: () => [
      ['one', `all${run}-0`],
      ['one', `all${run}-1`],
      ['one', `all${run}-2`],
    ],
  },
  { name: 'allowed, 256 descriptors', descriptors: (i) => Array.from({ length: 256 }, (_, j): Entry => ['big', `e${run}-${i}-${j}`]) },
  {
    name: 'rejected, 256 descriptors, all over',
    descriptors: () => Array.from({ length: 256 }, (_, j): Entry => ['one', `many${run}-${j}`]),
  },
]

interface Counter {
  name: string
  /** Calls so far, by command or function name. */
  read(): Promise<Map<string, number>>
}

/** Round trips are the calls of `trips`; the rest ran inside them. */
function redisCounter(redis: RedisServer): Counter & { trips: RegExp } {
  return { name: 'Redis', trips: /^evalsha$|^eval$/, read: async () => commandStats(redis) }
}

/** Calls per statement (pg_stat_statements, counted as they run); nested ones (inside the functions) prefixed `in `. */
function postgresCounter(server: PgServer): Counter & { trips: RegExp; close(): Promise<void> } {
  const client = new pg.Client({ connectionString: server.url })
  client.on('error', () => undefined) // the server stops before this process does
  const connected = client.connect().then(() => client.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements'))
  return {
    name: 'PostgreSQL',
    trips: /^SELECT fairvisor_(take|adjust)/,
    async read() {
      await connected
      const r = await client.query<{ query: string; calls: string; toplevel: boolean }>(
        "SELECT query, calls, toplevel FROM pg_stat_statements WHERE query LIKE '%fairvisor_%' AND query NOT LIKE '%pg_stat_statements%'",
      )
      const out = new Map<string, number>()
      for (const x of r.rows) {
        const name = (x.toplevel ? '' : 'in ') + x.query.replace(/\s+/g, ' ').slice(0, 40)
        out.set(name, (out.get(name) ?? 0) + Number(x.calls))
      }
      return out
    },
    close: () => client.end().catch(() => undefined),
  }
}

function delta(before: Map<string, number>, after: Map<string, number>): Map<string, number> {
  const out = new Map<string, number>()
  for (const [k, v] of after) if (v - (before.get(k) ?? 0) > 0 && k !== 'info') out.set(k, v - (before.get(k) ?? 0))
  return out
}

const ask = (c: GrpcClients, entries: Entry[]) =>
  c.shouldRateLimit({ domain: 'bench', descriptors: entries.map(([key, value]) => ({ entries: [{ key, value }] })) })

async function measure(store: string, counter: Counter & { trips: RegExp }, stop: boolean): Promise<string[][]> {
  const grpcPort = await freePort()
  await startGatewayProcess({
    FAIRVISOR_MODE: 'decision_service',
    FAIRVISOR_GRPC_PORT: String(grpcPort),
    FAIRVISOR_RLS_CONFIG: rls,
    FAIRVISOR_STORE: store,
    FAIRVISOR_STORE_TIMEOUT_MS: '2000',
    FAIRVISOR_RLS_STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT: String(stop),
  })
  const c = grpcClients(grpcPort)
  const rows: string[][] = []
  try {
    run++
    await ask(c, [['big', `warm${run}`]]) // connections open, scripts loaded
    for (const k of CASES) {
      // Once first: the counters kept over their limit (`one`) reach it.
      await ask(c, k.descriptors(-1))
      const before = await counter.read()
      let rejected = 0
      const ms: number[] = []
      for (let i = 0; i < CALLS; i++) {
        const t0 = performance.now()
        if ((await ask(c, k.descriptors(i))).overall_code === 2) rejected++
        ms.push(performance.now() - t0)
      }
      const d = delta(before, await counter.read())
      const trips = [...d].filter(([name]) => counter.trips.test(name)).reduce((a, [, n]) => a + n, 0)
      const per = [...d].map(([name, n]) => `${name} ${(n / CALLS).toFixed(2)}`).join(', ')
      const row = [counter.name, stop ? 'STOP_CACHE…=true' : 'default', k.name, `${rejected}/${CALLS}`, (trips / CALLS).toFixed(2)]
      rows.push([...row, median(ms).toFixed(2), per])
    }
  } finally {
    c.close()
    await stopAll()
  }
  return rows
}

const redis = await startRedis()
const postgres = await startPostgres(['-c', 'shared_preload_libraries=pg_stat_statements', '-c', 'pg_stat_statements.track=all'])
try {
  const rows: string[][] = [
    ['store', 'charge mode', 'call', 'rejected', 'round trips per call', 'median ms', 'per call, by command / statement'],
  ]
  const pgCounter = postgresCounter(postgres)
  for (const stop of [false, true]) {
    rows.push(...(await measure(redis.url, redisCounter(redis), stop)))
    rows.push(...(await measure(postgres.url, pgCounter, stop)))
  }
  await pgCounter.close()
  console.log(table(rows))
} finally {
  await redis.stop()
  await postgres.stop()
}
