/**
 * Reverse-proxy throughput, in one run and one process tree:
 *
 *   - backend:    a node:http server (own process) answering a small 200, hit directly;
 *   - gateway:    dist/cli.js in reverse_proxy mode with a bundle of no policies
 *                 (every request evaluated and allowed), access log off;
 *   - bare proxy: test/bench/bare-proxy.ts, node:http + undici Pool.request, same pool settings;
 *   - nginx:      proxy_pass with upstream keepalive, one worker (when nginx is on PATH).
 *
 * Each target gets the same fixed number of keep-alive connections for a fixed
 * time (wrk, one thread; autocannon without wrk). Rounds are interleaved with a
 * rotating order and the medians are reported. Target: gateway ≥ 0.95 × bare proxy.
 *
 *   npm run build && flock /tmp/fv-heavy.lock node --import tsx test/bench/proxy.bench.ts [seconds=5] [rounds=3] [connections=32]
 *   (or: npm run bench -- proxy)
 *
 * FV_BENCH_PROFILE=<dir> runs the gateway under `node --cpu-prof` (profiles land in <dir>).
 */
import {
  emptyBundleFile,
  haveCommand,
  interleave,
  runLoad,
  startBackendProcess,
  startBareProxy,
  startGatewayProcess,
  startNginxProxy,
  stopAll,
  summarise,
  table,
  type LoadResult,
  type Running,
} from './lib.js'

const SECONDS = Number(process.argv[2] ?? 5)
const ROUNDS = Number(process.argv[3] ?? 3)
const CONNECTIONS = Number(process.argv[4] ?? 32)
const PROFILE_DIR = process.env.FV_BENCH_PROFILE

async function main(): Promise<void> {
  const backend = await startBackendProcess()
  const targets: Running[] = [
    backend,
    await startGatewayProcess(
      { FAIRVISOR_BACKEND_URL: backend.url, FAIRVISOR_CONFIG_FILE: emptyBundleFile() },
      PROFILE_DIR ? ['--cpu-prof', '--cpu-prof-dir', PROFILE_DIR] : [],
    ),
    await startBareProxy(backend.url),
  ]
  if (haveCommand('nginx')) targets.push(await startNginxProxy(backend.url))
  else console.log('nginx is not on PATH: no nginx comparison')

  const load = (t: Running, seconds: number): Promise<LoadResult> =>
    runLoad({ url: `${t.url}/bench?q=1`, connections: CONNECTIONS, seconds })
  // Warm-up: JIT, connection pools, nginx upstream keep-alive.
  for (const t of targets) await load(t, Math.min(2, SECONDS))

  console.log(
    `load: ${haveCommand('wrk') ? 'wrk -t1' : 'autocannon'}, ${CONNECTIONS} connections, ${SECONDS} s per run, ${ROUNDS} interleaved rounds, medians`,
  )
  const runs = await interleave(targets, ROUNDS, async (t, round) => {
    const r = await load(t, SECONDS)
    console.log(
      `  round ${round + 1} ${t.name.padEnd(16)} ${r.rps.toFixed(0).padStart(7)} req/s  p50 ${r.p50Ms.toFixed(2)} ms  p99 ${r.p99Ms.toFixed(2)} ms`,
    )
    return r
  })
  await stopAll()

  const med = new Map([...runs].map(([name, rs]) => [name, summarise(rs)]))
  const rows = [['target', 'req/s', 'p50 ms', 'p99 ms', 'requests', 'non-2xx', 'errors']]
  for (const [name, r] of med) {
    rows.push([name, r.rps.toFixed(0), r.p50Ms.toFixed(2), r.p99Ms.toFixed(2), String(r.requests), String(r.non2xx), String(r.errors)])
  }
  console.log(`\n${table(rows)}\n`)

  const gw = med.get('gateway')!
  const bare = med.get('bare proxy')!
  const ratio = gw.rps / bare.rps
  console.log(`gateway / bare proxy: ${ratio.toFixed(3)} (target ≥ 0.95) ${ratio >= 0.95 ? 'PASS' : 'MISS'}`)
  const nginx = med.get('nginx proxy_pass')
  if (nginx) console.log(`gateway / nginx proxy_pass: ${(gw.rps / nginx.rps).toFixed(3)}`)
  const bad = [...med].filter(([, r]) => r.non2xx > 0 || r.errors > 0)
  if (bad.length) {
    console.log(`errors or non-2xx answers: ${bad.map(([n]) => n).join(', ')}; the figures above are not comparable`)
    process.exitCode = 1
  }
}

main().catch(async (err: Error) => {
  console.error(err.stack ?? err.message)
  await stopAll()
  process.exitCode = 1
})
