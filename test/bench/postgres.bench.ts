/**
 * The gateway with the PostgreSQL store against Redis and in-process, in one
 * run: requests/s and p99 on the allow path and on the reject path, and the
 * PostgreSQL statements per request (from pg_stat_statements: calls of the
 * take statement around each run; below 1.0 because requests of one
 * event-loop turn share one statement; cross-checked with the commits counted
 * in pg_stat_database).
 *
 *   flock /tmp/fv-heavy.lock node --import tsx test/bench/postgres.bench.ts [--no-pin] [seconds=1] [rounds=5] [instances=2] [connections=64]
 *
 * Redis and PostgreSQL are servers this benchmark starts (a private cluster
 * with pg_stat_statements preloaded, so nobody else's statements count).
 * Each instance starts a fresh gateway per store, warms each up, and runs
 * `rounds` rounds over the three per path, order rotated every round
 * (interleave). Gateways on CPU 0; wrk, backend and both servers on the other
 * (`--no-pin`: the scheduler places everything).
 */
import pg from 'pg'
import { startPostgres } from '../helpers/postgres-servers.js'
import { allowRejectBundle, interleave, median, runLoad, summarise, table, tempDir, type LoadResult, type Running } from './lib.js'
import { benchArgs, RESULT_HEADER, resultRow, startStoreBench, totalRequests } from './store-bench.js'

const { noPin, nums } = benchArgs()
const [seconds = 1, rounds = 5, instances = 2, connections = 64] = nums

type StoreName = 'memory' | 'redis' | 'postgres'
interface Target {
  name: string
  store: StoreName
  path: string
  gw: Running
}

async function main(): Promise<void> {
  const bench = await startStoreBench({
    bundleFile: allowRejectBundle(tempDir('fv-bench-pg-')),
    pin: !noPin,
    env: { FAIRVISOR_STORE_TIMEOUT_MS: '1000' },
  })
  const pgServer = await startPostgres(['-c', 'shared_preload_libraries=pg_stat_statements', '-c', 'max_connections=50'])
  const admin = new pg.Client({ connectionString: pgServer.url })
  await admin.connect()
  await admin.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements')
  const counts = async (): Promise<{ take: number; commits: number }> => {
    const r = await admin.query(
      `SELECT (SELECT coalesce(sum(calls), 0) FROM pg_stat_statements WHERE query LIKE 'SELECT fairvisor_take(%') AS take, (SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()) AS commits`,
    )
    return { take: Number(r.rows[0].take), commits: Number(r.rows[0].commits) }
  }
  try {
    const urls: Record<StoreName, string> = { memory: 'memory', redis: bench.redis.url, postgres: pgServer.url }
    const names = (['allow', 'reject'] as const).flatMap((p) => (['memory', 'redis', 'postgres'] as const).map((s) => `${s} ${p}`))
    const runs = new Map<string, LoadResult[]>(names.map((n) => [n, []]))
    const perRequest = { take: [] as number[], commits: [] as number[] }
    const load = async (x: Target): Promise<LoadResult> => {
      const before = x.store === 'postgres' ? await counts() : undefined
      const r = await runLoad({ url: x.gw.url + x.path, connections, seconds, headers: { 'x-user': 'bench' } })
      if (before && x.path.startsWith('/allow/')) {
        const after = await counts()
        perRequest.take.push((after.take - before.take) / r.requests)
        perRequest.commits.push((after.commits - before.commits - 1) / r.requests) // less our own counting query
      }
      return r
    }
    for (let i = 0; i < instances; i++) {
      const gws = {} as Record<StoreName, Running>
      for (const s of ['memory', 'redis', 'postgres'] as const) gws[s] = await bench.gateway(urls[s])
      const targets = (path: string): Target[] =>
        (['memory', 'redis', 'postgres'] as const).map((s) => ({ name: `${s} ${path.split('/')[1]}`, store: s, path, gw: gws[s] }))
      for (const x of [...targets('/allow/x'), ...targets('/reject/x')])
        await runLoad({ url: x.gw.url + x.path, connections, seconds: 2, headers: { 'x-user': 'bench' } })
      for (const path of ['/allow/x', '/reject/x']) {
        const got = await interleave(targets(path), rounds, load)
        for (const [k, v] of got) runs.get(k)!.push(...v)
      }
      console.log(
        `  instance ${i + 1}/${instances}: allow ${['memory', 'redis', 'postgres'].map((s) => Math.round(median(runs.get(`${s} allow`)!.map((r) => r.rps)))).join(' / ')} req/s (memory / redis / postgres, medians so far)`,
      )
      await Promise.all(Object.values(gws).map((g) => g.stop()))
    }
    const rows = [RESULT_HEADER, ...names.map((name) => resultRow(name, summarise(runs.get(name)!)))]
    const placement = bench.placement('wrk + backend + Redis + PostgreSQL')
    console.log(
      `\n${runs.get('memory allow')![0]!.tool}, ${connections} connections, ${seconds} s per run; ${instances} instances × ${rounds} rounds per path; ${placement}\n`,
    )
    console.log(table(rows))
    const total = (n: string): number => totalRequests(runs, n)
    for (const p of ['allow', 'reject'])
      console.log(
        `postgres / in-process, ${p}: ${(total(`postgres ${p}`) / total(`memory ${p}`)).toFixed(3)}; postgres / redis: ${(total(`postgres ${p}`) / total(`redis ${p}`)).toFixed(3)} (ratios of total requests)`,
      )
    const f = (xs: number[]): string => `median ${median(xs).toFixed(3)}, max ${Math.max(...xs).toFixed(3)}`
    console.log(
      `postgres take statements per request on the allow path (pg_stat_statements): ${f(perRequest.take)} over ${perRequest.take.length} runs`,
    )
    console.log(`postgres commits per request on the allow path (pg_stat_database xact_commit): ${f(perRequest.commits)}`)
    if (perRequest.take.some((x) => x > 1.0001)) process.exitCode = 1 // never more than one statement per request
  } finally {
    await admin.end()
    await bench.stop()
    await pgServer.stop()
  }
}

await main()
