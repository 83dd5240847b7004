/**
 * Resident memory of the real gateway per FAIRVISOR_WORKERS, and what one
 * worker thread adds, for sizing a container's memory limit
 * (docs/deploy.md#sizing-workers-cpu-and-memory). For each worker count: the
 * reverse proxy in front of a small backend, the in-process store at its
 * default bound, the example bundle policies/per-api-key.json (no LLM rule);
 * RSS of the whole process (every worker thread, the supervisor and the
 * shared table) once ready and idle, then right after `seconds` of wrk load
 * (one thread, `connections` keep-alive connections: bounded by them) on
 * `keys` distinct API keys drawn at random (each key's first requests pass:
 * mostly 200s, proxied). Peak is the kernel's high-water mark (VmHWM).
 *
 * Per worker is the difference between two worker counts of two or more
 * (both run the supervisor and the shared table; one worker runs neither),
 * divided by the workers added, taken per round and then the median over
 * rounds; the counts run interleaved, their order rotated each round. The
 * goal (issue 35): at most 40 MB idle and 60 MB after a minute of load per
 * worker, checked on the last two counts.
 *
 *   npm run bench -- worker-memory [workers=1,2,4] [seconds=60] [keys=1000000] [connections=32] [rounds=3]
 *
 * FV_GATEWAY_DIR=<checkout with dist/ built> measures that build instead (an
 * earlier commit, for a before / after).
 *
 * Needs wrk on PATH. The machine is shared: run it under the lock
 * (`flock /tmp/fv-heavy.lock npm run bench -- worker-memory`).
 */
import { spawn } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { loadavg } from 'node:os'
import { join } from 'node:path'
import { haveCommand, median, ROOT, type Running, startBackendProcess, startGatewayProcess, stopAll, table, tempDir } from './lib.js'

const counts = (process.argv[2] ?? '1,2,4').split(',').map(Number)
const seconds = Number(process.argv[3] ?? 60)
const keys = Number(process.argv[4] ?? 1_000_000)
const connections = Number(process.argv[5] ?? 32)
const rounds = Number(process.argv[6] ?? 3)
const MiB = 2 ** 20
const cli = process.env.FV_GATEWAY_DIR === undefined ? undefined : join(process.env.FV_GATEWAY_DIR, 'dist/cli.js')
/** The goals per worker, in MB (10⁶ bytes) as the issue states them. */
const GOAL_IDLE_MB = 40
const GOAL_LOADED_MB = 60

/** VmRSS and VmHWM of a process, in MiB (Linux). */
function memory(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  const kb = (field: string): number => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)![1]) * 1024
  return { rss: kb('VmRSS') / MiB, peak: kb('VmHWM') / MiB }
}

/** RSS once it has stopped moving: two readings a second apart within 1 MiB (at most 15 s). */
async function settled(pid: number): Promise<number> {
  let last = memory(pid).rss
  for (let i = 0; i < 15; i++) {
    await new Promise((r) => setTimeout(r, 1000))
    const now = memory(pid).rss
    if (Math.abs(now - last) < 1) return now
    last = now
  }
  return last
}

/** Ready: /readyz answers 200 (a bundle applied in every worker). */
async function ready(gw: Running): Promise<void> {
  for (;;) {
    const r = await fetch(`${gw.url}/readyz`).catch(() => undefined)
    await r?.arrayBuffer()
    if (r?.status === 200) return
    await new Promise((res) => setTimeout(res, 100))
  }
}

/** wrk with a Lua script drawing X-Api-Key from `keys` keys per request. */
async function wrk(url: string, script: string): Promise<{ requests: number; non2xx: number }> {
  const proc = spawn('wrk', ['-t1', `-c${connections}`, `-d${seconds}s`, '-s', script, `${url}/anything`], {
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let out = ''
  proc.stdout.on('data', (c: Buffer) => (out += c))
  proc.stderr.on('data', (c: Buffer) => (out += c))
  const code = await new Promise<number | null>((r) => proc.once('close', r))
  if (code !== 0) throw new Error(`wrk exited with ${code}: ${out}`)
  return {
    requests: Number(/(\d+) requests in/.exec(out)?.[1] ?? Number.NaN),
    non2xx: Number(/Non-2xx or 3xx responses: (\d+)/.exec(out)?.[1] ?? 0),
  }
}

interface Run {
  idle: number
  loaded: number
  peak: number
  requests: number
  non2xx: number
}

if (!haveCommand('wrk')) {
  console.error('worker-memory: wrk is not on PATH (Debian: apt-get install wrk)')
  process.exit(2)
}
const dir = tempDir('fv-bench-mem-')
const manyKeys = join(dir, 'many.lua')
writeFileSync(
  manyKeys,
  `math.randomseed(os.time())\nrequest = function()\n  return wrk.format("GET", nil, { ["X-Api-Key"] = "k-" .. math.random(${keys}) })\nend\n`,
)

/** One start: a gateway that exits while starting (the shared machine) is started again, once. */
async function measure(backendUrl: string, n: number, retry = true): Promise<Run> {
  try {
    return await measureOnce(backendUrl, n)
  } catch (err) {
    if (!retry) throw err
    console.error(`workers=${n}: ${(err as Error).message}; starting it again`)
    return measure(backendUrl, n, false)
  }
}

async function measureOnce(backendUrl: string, n: number): Promise<Run> {
  const gw = await startGatewayProcess(
    {
      FAIRVISOR_BACKEND_URL: backendUrl,
      FAIRVISOR_CONFIG_FILE: join(ROOT, 'policies/per-api-key.json'),
      FAIRVISOR_STORE: 'memory',
      FAIRVISOR_WORKERS: String(n),
    },
    [],
    undefined,
    cli,
  )
  try {
    const pid = gw.proc.pid!
    await ready(gw)
    const idle = await settled(pid)
    const load = await wrk(gw.url, manyKeys)
    const after = memory(pid)
    return { idle, loaded: after.rss, peak: after.peak, ...load }
  } finally {
    await gw.stop()
  }
}

const backend = await startBackendProcess()
const runs = new Map<number, Run[]>(counts.map((n) => [n, []]))
const loads: number[] = []
for (let round = 0; round < rounds; round++) {
  for (let i = 0; i < counts.length; i++) {
    const n = counts[(i + round) % counts.length]!
    loads.push(loadavg()[0]!)
    runs.get(n)!.push(await measure(backend.url, n))
    console.log(`round ${round + 1}: workers=${n} done`)
  }
}
await stopAll()

const med = (n: number, f: (r: Run) => number): number => median(runs.get(n)!.map(f))
console.log(
  `\nRSS of the gateway process (every thread) in MiB, reverse proxy, in-process store (FAIRVISOR_SHARED_TABLE_SIZE default), ` +
    `policies/per-api-key.json, wrk -t1 -c${connections} -d${seconds}s on ${keys} random keys, median of ${rounds} interleaved rounds, ` +
    `Node ${process.versions.node}, ${cli ?? 'this checkout'}, load average ${Math.min(...loads).toFixed(1)}–${Math.max(...loads).toFixed(1)}:\n`,
)
console.log(
  table([
    ['workers', 'idle', `after ${seconds} s`, 'peak', 'rounds: idle / after', 'requests (non-2xx)'],
    ...counts.map((n) => [
      String(n),
      med(n, (r) => r.idle).toFixed(0),
      med(n, (r) => r.loaded).toFixed(0),
      med(n, (r) => r.peak).toFixed(0),
      runs
        .get(n)!
        .map((r) => `${r.idle.toFixed(0)} / ${r.loaded.toFixed(0)}`)
        .join(', '),
      runs
        .get(n)!
        .map((r) => `${r.requests} (${r.non2xx})`)
        .join(', '),
    ]),
  ]),
)

// Per worker: between consecutive counts of two workers or more, per round, then the median.
const multi = counts.filter((n) => n >= 2).sort((a, b) => a - b)
const perWorker = (a: number, b: number, f: (r: Run) => number): number =>
  median(runs.get(b)!.map((rb, i) => (f(rb) - f(runs.get(a)![i]!)) / (b - a)))
const pairs = multi.slice(1).map((b, i) => [multi[i]!, b] as const)
if (pairs.length === 0) {
  console.log('\nper worker: give two worker counts of 2 or more (e.g. 2,4)')
  process.exit(0)
}
console.log(
  `\nPer worker thread (MiB; the difference between two worker counts over the workers added, median of per-round differences):\n`,
)
console.log(
  table([
    ['workers', 'idle', `after ${seconds} s`, 'peak', 'supervisor + table, idle (RSS − workers × idle per worker)'],
    ...pairs.map(([a, b]) => {
      const idle = perWorker(a, b, (r) => r.idle)
      return [
        `${a} → ${b}`,
        idle.toFixed(1),
        perWorker(a, b, (r) => r.loaded).toFixed(1),
        perWorker(a, b, (r) => r.peak).toFixed(1),
        (med(b, (r) => r.idle) - b * idle).toFixed(0),
      ]
    }),
  ]),
)
const [a, b] = pairs[pairs.length - 1]!
const toMB = (mib: number): number => (mib * MiB) / 1e6
const idleMB = toMB(perWorker(a, b, (r) => r.idle))
const loadedMB = toMB(perWorker(a, b, (r) => r.loaded))
const verdict = (x: number, goal: number): string => `${x.toFixed(1)} MB (goal ≤ ${goal} MB: ${x <= goal ? 'met' : 'MISSED'})`
console.log(
  `\nper worker, ${a} → ${b} workers: idle ${verdict(idleMB, GOAL_IDLE_MB)}; after ${seconds} s of load ${verdict(loadedMB, GOAL_LOADED_MB)}`,
)
process.exitCode = idleMB <= GOAL_IDLE_MB && loadedMB <= GOAL_LOADED_MB ? 0 : 1
