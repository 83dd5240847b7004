/**
 * The gateway with the in-process store vs with Redis, in one run: requests/s
 * and p99 on the allow path and on the reject path, Redis commands per request
 * (from INFO commandstats around each Redis run: must be 1.0, one EVALSHA),
 * and the CPU each process spent per request. Redis mode must reach ≥ 0.85 of
 * in-process mode on the allow path.
 *
 *   flock /tmp/fv-heavy.lock node --import tsx test/bench/redis.bench.ts [--no-pin] [seconds=1] [pairs=10] [instances=6] [connections=64]
 *
 * Each gateway is a child process in front of the same backend child process;
 * the Redis is a redis-server this benchmark starts (so nobody else's traffic
 * is counted). `instances` times, a fresh in-process gateway and a fresh Redis
 * gateway are started (which one first alternates), warmed up, and run in
 * `pairs` short adjacent pairs per path, order flipped every pair (abPairs),
 * then stopped: two processes of the same build differ by several per cent
 * (JIT decisions), so one process per side would measure that too. The
 * verdict is the ratio of total requests (all pairs, same seconds on both
 * sides: the ratio of mean requests/s); the median of the per-pair ratios, its
 * quartiles and the per-instance medians are printed beside it. Why totals:
 * over five runs they spread 0.855–0.889, the median of pair ratios
 * 0.856–0.915 (one 1 s pair can swing from 0.6 to 1.4 on this VM).
 *
 * CPU placement (pinCpus): each gateway on CPU 0, wrk, the backend and Redis
 * on the other CPUs, as in production where Redis is not on the gateway's
 * cores. `--no-pin` lets the scheduler place everything.
 *
 * Connections: 64 by default, so that both gateways are measured saturated.
 * The in-process gateway already keeps CPU 0 busy with 32; the Redis gateway,
 * whose every request also waits for a Redis that shares one CPU with wrk and
 * the backend here, left CPU 0 idle ≈ 14 % of the time with 32
 * (docs/benchmarks.md, "Redis store", has both). Pass 32 to see that case.
 */
import {
  abPairs,
  allowRejectBundle,
  commandStats,
  cpuMicros,
  median,
  pairedRatio,
  quantile,
  runLoad,
  summarise,
  table,
  tempDir,
  type LoadResult,
  type Running,
} from './lib.js'
import { benchArgs, RESULT_HEADER, resultRow, startStoreBench, totalRequests } from './store-bench.js'

const { noPin, nums } = benchArgs()
const [seconds = 1, pairs = 10, instances = 6, connections = 64] = nums

interface Target {
  name: string
  store: 'memory' | 'redis'
  path: string
  gw: Running
}

/** Commands the token-bucket script runs inside its EVALSHA (counted by Redis, but not sent by the gateway). */
const INSIDE_SCRIPT = new Set(['time', 'get', 'set', 'psetex'])

async function main(): Promise<void> {
  const bench = await startStoreBench({ bundleFile: allowRejectBundle(tempDir('fv-bench-redis-')), pin: !noPin })
  const { redis, backend } = bench
  try {
    const names = ['memory allow', 'redis allow', 'memory reject', 'redis reject']
    const runs = new Map<string, LoadResult[]>(names.map((n) => [n, []]))
    const perRequest = new Map<string, number[]>()
    /** Per Redis run: commands sent minus requests answered. */
    const excess: number[] = []
    const cpu = new Map<string, { gw: number[]; redis: number[]; backend: number[] }>()
    /** Per-instance medians of the per-round ratios redis / in-process, per path. */
    const instanceRatios = { allow: [] as number[], reject: [] as number[] }
    const load = async (x: Target): Promise<LoadResult> => {
      const before = x.store === 'redis' ? commandStats(redis) : undefined
      const pids = [x.gw.proc.pid, x.store === 'redis' ? redis.proc.pid : undefined, backend.proc.pid]
      const c0 = pids.map(cpuMicros)
      const r = await runLoad({ url: x.gw.url + x.path, connections, seconds, headers: { 'x-user': 'bench' } })
      const c1 = pids.map(cpuMicros)
      const e = cpu.get(x.name) ?? { gw: [], redis: [], backend: [] }
      const lists = [e.gw, e.redis, e.backend]
      for (const [i, v] of c1.entries()) if (v !== undefined && c0[i] !== undefined) lists[i]!.push((v - c0[i]!) / r.requests)
      cpu.set(x.name, e)
      if (before) {
        const after = commandStats(redis)
        // Commands the gateway sent: everything but our own INFO and the calls the script makes inside its one atomic run.
        let calls = 0
        for (const [name, n] of after) if (!INSIDE_SCRIPT.has(name) && name !== 'info') calls += n - (before.get(name) ?? 0)
        perRequest.set(x.name, [...(perRequest.get(x.name) ?? []), calls / r.requests])
        if (x.path.startsWith('/allow/')) excess.push(calls - r.requests)
      }
      return r
    }
    for (let i = 0; i < instances; i++) {
      // Which gateway starts first alternates: start order (ports, memory layout, JIT timing) must not favour one side.
      const start = (store: string): Promise<Running> => bench.gateway(store)
      let memGw: Running
      let redisGw: Running
      if (i % 2 === 0) {
        memGw = await start('memory')
        redisGw = await start(redis.url)
      } else {
        redisGw = await start(redis.url)
        memGw = await start('memory')
      }
      const t = (name: string, store: Target['store'], path: string): Target => ({
        name,
        store,
        path,
        gw: store === 'memory' ? memGw : redisGw,
      })
      const targets = [
        t(names[0]!, 'memory', '/allow/x'),
        t(names[1]!, 'redis', '/allow/x'),
        t(names[2]!, 'memory', '/reject/x'),
        t(names[3]!, 'redis', '/reject/x'),
      ]
      // Warm up both gateways (JIT, connection pools, script cache) and drain the reject buckets.
      for (const x of targets) await runLoad({ url: x.gw.url + x.path, connections, seconds: 3, headers: { 'x-user': `bench-${i}` } })
      const allow = await abPairs(targets[0]!, targets[1]!, pairs, load)
      const reject = await abPairs(targets[2]!, targets[3]!, pairs, load)
      for (const [k, v] of [...allow, ...reject]) runs.get(k)!.push(...v)
      instanceRatios.allow.push(pairedRatio(allow, names[1]!, names[0]!).median)
      instanceRatios.reject.push(pairedRatio(reject, names[3]!, names[2]!).median)
      const rps = (m: Map<string, LoadResult[]>, n: string): number => Math.round(median(m.get(n)!.map((r) => r.rps)))
      console.log(
        `  instance ${i + 1}/${instances} (${i % 2 === 0 ? 'in-process' : 'Redis'} gateway started first): allow ${rps(allow, names[0]!)} vs ${rps(allow, names[1]!)} req/s (ratio ${instanceRatios.allow.at(-1)!.toFixed(3)}), reject ${rps(reject, names[2]!)} vs ${rps(reject, names[3]!)} req/s (ratio ${instanceRatios.reject.at(-1)!.toFixed(3)})`,
      )
      await Promise.all([memGw.stop(), redisGw.stop()])
    }

    const s = new Map([...runs].map(([k, v]) => [k, summarise(v)]))
    const rows = [[...RESULT_HEADER, 'CPU µs/request: gateway', 'redis', 'backend', 'redis cmds/request']]
    for (const name of names) {
      const c = cpu.get(name)
      const cpr = perRequest.get(name)
      const m = (xs: number[] | undefined): string => (xs?.length ? median(xs).toFixed(1) : '-')
      rows.push([...resultRow(name, s.get(name)!), m(c?.gw), m(c?.redis), m(c?.backend), cpr ? median(cpr).toFixed(3) : '-'])
    }
    const placement = bench.placement('wrk + backend + Redis')
    console.log(
      `\n${runs.get('memory allow')![0]!.tool}, ${connections} connections, ${seconds} s per run; ${instances} instances × ${pairs} adjacent pairs per path; ${placement}\n`,
    )
    console.log(table(rows))
    // Verdict on the ratio of total requests; the per-pair ratios are summarised beside it.
    const total = (n: string): number => totalRequests(runs, n)
    const ratios = (a: string, b: string, perInstance: number[]): string => {
      const p = pairedRatio(runs, a, b)
      return `${(total(a) / total(b)).toFixed(3)} (ratio of total requests; median of ${p.rounds.length} pair ratios ${p.median.toFixed(3)}, quartiles ${quantile(p.rounds, 0.25).toFixed(2)}–${quantile(p.rounds, 0.75).toFixed(2)}; per-instance medians ${Math.min(...perInstance).toFixed(3)}–${Math.max(...perInstance).toFixed(3)})`
    }
    const allow = total('redis allow') / total('memory allow')
    console.log(`\nredis / in-process, allow: ${ratios('redis allow', 'memory allow', instanceRatios.allow)}; must be ≥ 0.85`)
    console.log(`redis / in-process, reject: ${ratios('redis reject', 'memory reject', instanceRatios.reject)}`)
    const cmds = perRequest.get('redis allow')!
    // Exactly one EVALSHA per request: a run may count up to one command per connection more than answers (requests still in flight when wrk stops counting), never fewer.
    console.log(
      `redis commands per request on the allow path: median ${median(cmds).toFixed(4)}, max ${Math.max(...cmds).toFixed(4)} over ${cmds.length} runs; commands minus answered requests per run ${Math.min(...excess)}–${Math.max(...excess)} (must lie in 0–${connections}, one per connection in flight when wrk stops counting)`,
    )
    if (allow < 0.85) process.exitCode = 1
    if (excess.some((x) => x < 0 || x > connections)) process.exitCode = 1
  } finally {
    await bench.stop()
  }
}

await main()
