/**
 * FAIRVISOR_WORKERS=1 against =2 on this machine, in one run: decisions/s of
 * the decision service (allow path, one key, so both workers contend for one
 * bucket lock) and proxied requests/s (reverse proxy to a small backend),
 * then the resident memory of one million keys in the shared table.
 *
 * Placement (taskset): wrk (one thread, no per-request Lua: headers are set
 * once) runs on CPU 1, and so does the backend; the gateway runs on CPU 0
 * with one worker, on CPUs 0-1 with two (the second worker shares CPU 1 with
 * the load generator, as it would on a two-core host that also runs the
 * client). What the two workers can gain is therefore bounded by what wrk
 * (and, proxied, the backend) leave of CPU 1: the table prints the cores the
 * gateway got and its CPU per request, which is what scales. The backend is
 * a raw TCP responder (a fixed 200 per request head, no HTTP parser), so that
 * it takes little of CPU 1: a node:http backend took about half of it.
 * Rounds alternate 1 and 2 workers; the medians are printed.
 *
 *   npm run build && node --import tsx test/bench/workers.bench.ts [seconds=6] [rounds=3] [connections=64]
 */
import { spawn } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { runInNewContext } from 'node:vm'
import { setFlagsFromString } from 'node:v8'
import { bucketLimit } from '../../src/algorithms/kinds/token-bucket/kind.js'
import { SharedMemoryStore } from '../../src/store/threads/store.js'
import { SharedTable } from '../../src/store/threads/table.js'
import type { Check } from '../../src/store/store.js'
import {
  allowRejectBundle,
  cpuMicros,
  median,
  parseWrk,
  spawnServer,
  startGatewayProcess,
  stopAll,
  table,
  tempDir,
  type LoadResult,
  type Running,
} from './lib.js'

const SECONDS = Number(process.argv[2] ?? 6)
const ROUNDS = Number(process.argv[3] ?? 3)
const CONNECTIONS = Number(process.argv[4] ?? 64)
const GEN_CPU = '1'
const dir = tempDir('fv-bench-workers-')

/**
 * Lua for wrk: each request names one of `n` users in X-User (n = 1: the same user throughout).
 * A per-request Lua function roughly doubles wrk's CPU, which here shares CPU 1 with the second
 * worker, so the figures printed are for one user.
 */
const usersLua = (n: number): string[] =>
  n === 1
    ? []
    : [
        'local i = 0',
        'request = function()',
        '  i = i + 1',
        `  wrk.headers["X-User"] = "user-" .. (i % ${n})`,
        '  return wrk.format()',
        'end',
      ]

/** wrk pinned to GEN_CPU. */
async function wrk(url: string, headers: Record<string, string>, method: string, users: number): Promise<LoadResult> {
  const script = join(dir, `s${Math.random().toString(36).slice(2)}.lua`)
  writeFileSync(
    script,
    [
      `wrk.method = ${JSON.stringify(method)}`,
      ...Object.entries(headers).map(([k, v]) => `wrk.headers[${JSON.stringify(k)}] = ${JSON.stringify(v)}`),
      ...usersLua(users),
    ].join('\n'),
  )
  const proc = spawn('taskset', ['-c', GEN_CPU, 'wrk', '-t1', `-c${CONNECTIONS}`, `-d${SECONDS}s`, '--latency', '-s', script, url], {
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  let out = ''
  proc.stdout.on('data', (c: Buffer) => (out += c))
  const code = await new Promise<number | null>((r) => proc.once('close', r))
  if (code !== 0) throw new Error(`wrk exited with ${code}`)
  return parseWrk(out)
}

const cpusFor = (workers: number): string => (workers === 1 ? '0' : '0,1')

/** A raw TCP backend on GEN_CPU: one fixed 200 response per request head (the gateway sends GETs without a body). */
function rawBackend(): Promise<Running> {
  const code = `const res = Buffer.from('HTTP/1.1 200 OK\\r\\ncontent-type: text/plain\\r\\ncontent-length: 19\\r\\n\\r\\nok from the backend')
require('net').createServer((s) => {
  s.setNoDelay(true)
  let buf = ''
  s.on('data', (d) => {
    buf += d.toString('latin1')
    let n = 0
    for (let i = buf.indexOf('\\r\\n\\r\\n'); i !== -1; i = buf.indexOf('\\r\\n\\r\\n')) (buf = buf.slice(i + 4)), n++
    if (n > 0) s.write(n === 1 ? res : Buffer.concat(Array(n).fill(res)))
  })
  s.on('error', () => {})
}).listen(0, '127.0.0.1', function () { console.log('PORT ' + this.address().port) })`
  return spawnServer('backend', 'taskset', ['-c', GEN_CPU, process.execPath, '-e', code])
}

/** The gateway; the warm-up run lets every worker start before the measured one (the port line comes from the first one up). */
function gateway(env: Record<string, string>, workers: number): Promise<Running> {
  return startGatewayProcess({ ...env, FAIRVISOR_WORKERS: String(workers) }, [], cpusFor(workers))
}

/** A run plus the gateway's CPU over it: cores busy on average, and CPU µs per request. */
interface Run extends LoadResult {
  cores: number
  cpuUsPerReq: number
}

async function measure(
  label: string,
  env: Record<string, string>,
  path: string,
  headers: Record<string, string>,
  method: string,
  users = 1,
): Promise<Map<number, Run[]>> {
  const runs = new Map<number, Run[]>([
    [1, []],
    [2, []],
  ])
  for (let round = 0; round < ROUNDS; round++) {
    for (const workers of round % 2 ? [2, 1] : [1, 2]) {
      const gw = await gateway(env, workers)
      try {
        await wrk(`${gw.url}${path}`, headers, method, users) // warm-up (JIT, every worker's connections)
        const cpu0 = cpuMicros(gw.proc.pid)
        const r = await wrk(`${gw.url}${path}`, headers, method, users)
        const cpu = (cpuMicros(gw.proc.pid) ?? NaN) - (cpu0 ?? NaN)
        runs.get(workers)!.push({ ...r, cores: cpu / (SECONDS * 1e6), cpuUsPerReq: cpu / r.requests })
        process.stderr.write(
          `${label} workers=${workers} round ${round + 1}: ${Math.round(r.rps)}/s (non-2xx ${r.non2xx}, errors ${r.errors}), gateway ${(cpu / (SECONDS * 1e6)).toFixed(2)} cores\n`,
        )
      } finally {
        await gw.stop()
      }
    }
  }
  return runs
}

/**
 * The paired ratio over the rounds whose one-worker gateway had its core (≥ 0.95 of CPU 0): in
 * the others something outside the benchmark ran on CPU 0 and the pair compares different
 * machines. "ratio (n)", or "none" when no round was undisturbed.
 */
function undisturbed(runs: Map<number, Run[]>): string {
  const ratios = runs
    .get(2)!
    .map((r, i) => ({ two: r, one: runs.get(1)![i]! }))
    .filter((p) => p.one.cores >= 0.95)
    .map((p) => p.two.rps / p.one.rps)
  return ratios.length === 0 ? 'none' : `${median(ratios).toFixed(2)} (${ratios.length})`
}

setFlagsFromString('--expose-gc')
const gc = runInNewContext('gc') as () => void
function rss(): number {
  gc()
  gc()
  return process.memoryUsage().rss
}

/** RSS added by one million distinct keys written into a shared table of `bytes`. */
function tableRss(keys: number, bytes: number): { mb: number; heapMb: number; perKey: number; refused: number; nsPerOp: number } {
  const key = (i: number): string => `tb:per_user:user-${String(i).padStart(7, '0')}`
  // The same million key strings through the heap first, so that the young generation they grow is in the baseline, as in a running gateway.
  let sink = 0
  for (let i = 0; i < keys; i++) sink += key(i).length
  const before = rss() + (sink & 0)
  const heapBefore = process.memoryUsage().heapTotal
  const t = SharedTable.create(bytes)
  const store = new SharedMemoryStore({ table: t })
  const check: Check = { key: '', limit: bucketLimit(10, 100), cost: 1, shadow: false }
  const checks = [check]
  const t0 = process.hrtime.bigint()
  for (let i = 0; i < keys; i++) {
    check.key = key(i)
    store.applyNow(checks, 1_700_000_000)
  }
  const ns = Number(process.hrtime.bigint() - t0) / keys
  const added = rss() - before
  // What is left of the key strings' churn in the JS heap, not the table.
  const heap = process.memoryUsage().heapTotal - heapBefore
  return { mb: added / 2 ** 20, heapMb: heap / 2 ** 20, perKey: (added - heap) / keys, refused: t.full, nsPerOp: ns }
}

async function main(): Promise<void> {
  const bundle = allowRejectBundle(dir)
  const decisionEnv = { FAIRVISOR_MODE: 'decision_service', FAIRVISOR_CONFIG_FILE: bundle }
  const call = { 'X-Original-Method': 'GET', 'X-Original-URI': '/allow/items?page=1', 'X-User': 'bench-user' }
  const decision = await measure('decision', decisionEnv, '/v1/decision', call, 'POST')
  const backend = await rawBackend()
  const proxied = await measure(
    'proxy',
    { FAIRVISOR_BACKEND_URL: backend.url, FAIRVISOR_CONFIG_FILE: bundle },
    '/allow/items?page=1',
    { 'X-User': 'bench-user' },
    'GET',
  )
  await stopAll()
  const rows: string[][] = [
    [
      '',
      '1 worker /s',
      '2 workers /s',
      'ratio',
      'paired ratio',
      'undisturbed rounds',
      'p99 ms (1 / 2)',
      'gateway cores (1 / 2)',
      'CPU µs/req (1 / 2)',
    ],
  ]
  for (const [name, runs] of [
    ['decision service (allow, 1 key)', decision],
    ['proxied (allow, 1 key)', proxied],
  ] as const) {
    const one = median(runs.get(1)!.map((r) => r.rps))
    const two = median(runs.get(2)!.map((r) => r.rps))
    const p99 = (w: number): string => median(runs.get(w)!.map((r) => r.p99Ms)).toFixed(2)
    const med = (w: number, f: (r: Run) => number, digits: number): string => median(runs.get(w)!.map(f)).toFixed(digits)
    rows.push([
      name,
      Math.round(one).toString(),
      Math.round(two).toString(),
      (two / one).toFixed(2),
      // Each round's own 2/1 ratio (its two runs are back to back), so load from elsewhere that comes and goes weighs less.
      median(runs.get(2)!.map((r, i) => r.rps / runs.get(1)![i]!.rps)).toFixed(2),
      undisturbed(runs),
      `${p99(1)} / ${p99(2)}`,
      `${med(1, (r) => r.cores, 2)} / ${med(2, (r) => r.cores, 2)}`,
      `${med(1, (r) => r.cpuUsPerReq, 1)} / ${med(2, (r) => r.cpuUsPerReq, 1)}`,
    ])
  }
  console.log(
    `workers benchmark: ${SECONDS} s × ${ROUNDS} rounds, ${CONNECTIONS} connections, wrk on CPU ${GEN_CPU}, gateway on CPU 0 (1 worker) or 0-1 (2 workers), medians`,
  )
  console.log(table(rows))
  // A run whose gateway got well under one core shared the CPUs with work from outside the benchmark.
  const disturbed = [...decision.values(), ...proxied.values()].flat().filter((r) => r.cores < 0.9 && r.cores > 0).length
  if (disturbed > 0) console.log(`note: ${disturbed} run(s) gave the gateway under 0.9 cores: other work on the machine took CPU from it`)
  const shared = tableRss(1_000_000, 80 * 2 ** 20)
  console.log(
    `1 000 000 keys in an 80 MiB shared table: +${shared.mb.toFixed(1)} MiB RSS, of which ${shared.heapMb.toFixed(1)} MiB JS heap (the keys passing through) → ${shared.perKey.toFixed(0)} bytes/key for the table; ${shared.refused} refused for want of room; ${shared.nsPerOp.toFixed(0)} ns per apply`,
  )
}

await main()
