/**
 * Shared benchmark helpers: start the processes under test (each a child of
 * the benchmark, so one run is one process tree), drive them with a fixed
 * number of keep-alive connections for a fixed time, and summarise.
 *
 *   const backend = await startBackendProcess()            // node:http, small 200
 *   const gw = await startGatewayProcess({ FAIRVISOR_BACKEND_URL: backend.url, FAIRVISOR_CONFIG_FILE: emptyBundleFile() })
 *   const r = await runLoad({ url: gw.url, connections: 32, seconds: 5 })   // wrk, else autocannon
 *   console.log(r.rps, r.p50Ms, r.p99Ms)
 *   await stopAll()
 *
 * Every process started here is killed by `stopAll()` and, as a last resort,
 * when the benchmark process exits. Run benchmarks under the shared lock:
 * `flock /tmp/fv-heavy.lock node --import tsx test/bench/<name>.bench.ts`.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { Socket } from 'node:net'
import { availableParallelism, tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import { nginxConf } from '../helpers/nginx.js'
import { cpuMs, freePort } from '../helpers/processes.js'
import type { RedisServer } from '../helpers/redis-servers.js'

export { freePort }

export const ROOT = fileURLToPath(new URL('../../', import.meta.url))
export const CLI = join(ROOT, 'dist/cli.js')

/** A server process started by this module. */
export interface Running {
  name: string
  /** http://127.0.0.1:<port> */
  url: string
  port: number
  proc: ChildProcess
  /** SIGTERM, then SIGKILL after 3 s; resolves when the process has exited. */
  stop(): Promise<void>
}

const started = new Set<ChildProcess>()
process.once('exit', () => {
  for (const p of started) if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL')
})

/** A fresh temp directory for one benchmark run (configs, pid files, logs). */
export function tempDir(prefix = 'fv-bench-'): string {
  return mkdtempSync(join(tmpdir(), prefix))
}

/** A bundle with no policies: the gateway allows and proxies every request. */
export function emptyBundleFile(dir = tempDir()): string {
  const file = join(dir, 'empty-bundle.json')
  writeFileSync(file, JSON.stringify({ bundle_version: 1, policies: [] }))
  return file
}

/** True when `cmd` is on PATH. */
export function haveCommand(cmd: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status === 0
}

/** A free TCP port on 127.0.0.1 (bound, then released; fine for a benchmark). */

function track(name: string, proc: ChildProcess, port: number): Running {
  started.add(proc)
  const exited = new Promise<void>((r) => proc.once('exit', () => r()))
  if (proc.exitCode !== null || proc.signalCode !== null) started.delete(proc)
  proc.once('exit', () => started.delete(proc))
  return {
    name,
    url: `http://127.0.0.1:${port}`,
    port,
    proc,
    async stop() {
      if (proc.exitCode !== null || proc.signalCode !== null) return
      proc.kill('SIGTERM')
      const t = setTimeout(() => proc.kill('SIGKILL'), 3000)
      await exited
      clearTimeout(t)
    },
  }
}

/**
 * Spawns a server and resolves once a stdout line reveals its port: either
 * `PORT <n>` or a JSON log line with `"port":<n>` (the gateway's start-up line).
 * stdout is drained for the life of the process so a chatty child never blocks.
 */
export function spawnServer(
  name: string,
  cmd: string,
  args: string[],
  env: Record<string, string> = {},
  timeoutMs = 15_000,
): Promise<Running> {
  const proc = spawn(cmd, args, { cwd: ROOT, env: { PATH: process.env.PATH, ...env }, stdio: ['ignore', 'pipe', 'inherit'] })
  started.add(proc)
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => {
      proc.kill('SIGKILL')
      reject(new Error(`${name} did not report a port within ${timeoutMs} ms`))
    }, timeoutMs)
    const onExit = (code: number | null): void => {
      clearTimeout(t)
      reject(new Error(`${name} exited with ${code} before listening`))
    }
    proc.once('exit', onExit)
    let found = false
    createInterface({ input: proc.stdout! }).on('line', (line) => {
      if (found) return
      const m = /^PORT (\d+)$/.exec(line) ?? /"port":(\d+)/.exec(line)
      if (!m) return
      found = true
      clearTimeout(t)
      proc.off('exit', onExit)
      resolve(track(name, proc, Number(m[1])))
    })
  })
}

/** The backend: a plain node:http server in its own process answering a small 200 body. */
export function startBackendProcess(body = 'ok from the backend'): Promise<Running> {
  const code = `const b = Buffer.from(${JSON.stringify(body)});
require('http').createServer((q, s) => { s.writeHead(200, { 'content-type': 'text/plain', 'content-length': b.length }); s.end(b) })
  .listen(0, '127.0.0.1', function () { console.log('PORT ' + this.address().port) })`
  return spawnServer('backend', process.execPath, ['-e', code])
}

/**
 * The real gateway (dist/cli.js; run `npm run build` first) on 127.0.0.1 and a
 * free port. `env` adds FAIRVISOR_* settings; logs stay at info so the start-up
 * line (which carries the port) is printed; the access log stays off.
 * `nodeArgs` go before the script, e.g. ['--cpu-prof', '--cpu-prof-dir', dir].
 */
/** `cli`: another build's dist/cli.js (a baseline to compare with); this checkout's by default. */
export function startGatewayProcess(env: Record<string, string>, nodeArgs: string[] = [], cpus?: string, cli = CLI): Promise<Running> {
  // One thread unless a benchmark asks for workers (workers.bench.ts compares them).
  const gwEnv = { FAIRVISOR_HOST: '127.0.0.1', FAIRVISOR_PORT: '0', FAIRVISOR_LOG_LEVEL: 'info', FAIRVISOR_WORKERS: '1', ...env }
  // taskset execs node in place, so the pid (and stop()) stay the gateway's own.
  if (cpus !== undefined) return spawnServer('gateway', 'taskset', ['-c', cpus, process.execPath, ...nodeArgs, cli], gwEnv)
  return spawnServer('gateway', process.execPath, [...nodeArgs, cli], gwEnv)
}

/**
 * CPU placement for a benchmark comparing two gateway builds or modes: the
 * gateway gets CPU 0 to itself, and this benchmark process and everything it
 * starts afterwards (load generator, backend, Redis) move to the other CPUs.
 * Both sides of a comparison are placed alike, so the ratio measures the
 * gateways and not where the scheduler happened to put four busy processes on
 * two cores; it is also how a gateway runs in production, where Redis and the
 * backend live elsewhere. Undefined (nothing pinned) without taskset or with
 * a single CPU. Call before starting anything.
 */
export function pinCpus(): { gateway: string; rest: string } | undefined {
  const n = availableParallelism()
  if (n < 2 || !haveCommand('taskset')) return undefined
  const rest = n === 2 ? '1' : `1-${n - 1}`
  // -a: every thread of this process, so children started later inherit the set.
  if (spawnSync('taskset', ['-apc', rest, String(process.pid)], { stdio: 'ignore' }).status !== 0) return undefined
  return { gateway: '0', rest }
}

/** test/bench/bare-proxy.ts in front of `backendUrl`: the floor a Node proxy on undici costs. */
export function startBareProxy(backendUrl: string): Promise<Running> {
  return spawnServer('bare proxy', process.execPath, ['--import', 'tsx', join(ROOT, 'test/bench/bare-proxy.ts')], {
    BACKEND_URL: backendUrl,
    PORT: '0',
  })
}

/**
 * nginx with one worker, in the foreground (`daemon off; master_process off`),
 * with its pid, logs and temp paths under a temp dir. `httpBody(port)` is the
 * content of the `http {}` block; it must `listen 127.0.0.1:<port>`.
 * Resolves once the port accepts connections. Call only when haveCommand('nginx').
 */
export async function startNginx(httpBody: (port: number) => string, name = 'nginx', cpu?: string): Promise<Running> {
  const dir = tempDir('fv-bench-nginx-')
  const port = await freePort()
  const conf = join(dir, 'nginx.conf')
  writeFileSync(conf, nginxConf(dir, httpBody(port), 4096))
  const argv = ['nginx', '-p', dir, '-c', conf, '-e', join(dir, 'error.log')]
  // taskset execs nginx in place (one process: master_process off): the pid is nginx's own.
  if (cpu !== undefined) argv.unshift('taskset', '-c', cpu)
  const proc = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'ignore', 'inherit'] })
  const running = track(name, proc, port)
  for (let i = 0; i < 100; i++) {
    if (proc.exitCode !== null) throw new Error(`nginx exited with ${proc.exitCode}; see ${dir}/error.log`)
    if (await canConnect(port)) return running
    await sleep(50)
  }
  await running.stop()
  throw new Error(`nginx did not listen on ${port}; see ${dir}/error.log`)
}

/** nginx `proxy_pass` to `backendUrl` with upstream keep-alive; `cpu`: pinned there. */
export function startNginxProxy(backendUrl: string, cpu?: string): Promise<Running> {
  const backend = new URL(backendUrl).host
  return startNginx(
    (port) => `  upstream backend { server ${backend}; keepalive 64; }
  server {
    listen 127.0.0.1:${port};
    location / { proxy_pass http://backend; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }`,
    'nginx proxy_pass',
    cpu,
  )
}

function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = new Socket()
    s.once('connect', () => {
      s.destroy()
      resolve(true)
    })
    s.once('error', () => resolve(false))
    s.connect(port, '127.0.0.1')
  })
}

/** Stops every process this module started. */
export async function stopAll(): Promise<void> {
  await Promise.all(
    [...started].map((p) => {
      if (p.exitCode !== null || p.signalCode !== null) return undefined
      return new Promise<void>((r) => {
        p.once('exit', () => r())
        p.kill('SIGTERM')
        setTimeout(() => p.kill('SIGKILL'), 3000).unref()
      })
    }),
  )
}

export interface LoadOptions {
  url: string
  /** Keep-alive connections held open for the whole run. */
  connections: number
  seconds: number
  method?: string
  headers?: Record<string, string>
  body?: string
}

export interface LoadResult {
  tool: 'wrk' | 'autocannon' | 'h2load'
  /** Requests per second over the run. */
  rps: number
  p50Ms: number
  p99Ms: number
  requests: number
  /** Answers outside 2xx/3xx. */
  non2xx: number
  /** Connect/read/write errors and timeouts. */
  errors: number
}

/** Milliseconds from a wrk duration such as `812.00us`, `1.25ms`, `2.01s`. */
function parseWrkDuration(text: string): number {
  const m = /^([\d.]+)(us|ms|s|m)$/.exec(text.trim())
  if (!m) return NaN
  const n = Number(m[1])
  return m[2] === 'us' ? n / 1000 : m[2] === 'ms' ? n : m[2] === 's' ? n * 1000 : n * 60_000
}

/** Parses `wrk --latency` output. */
export function parseWrk(out: string): LoadResult {
  const pct = (p: string): number => parseWrkDuration(new RegExp(`^\\s+${p}%\\s+(\\S+)`, 'm').exec(out)?.[1] ?? '')
  const sock = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out)
  return {
    tool: 'wrk',
    rps: Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1] ?? NaN),
    p50Ms: pct('50'),
    p99Ms: pct('99'),
    requests: Number(/(\d+) requests in/.exec(out)?.[1] ?? NaN),
    non2xx: Number(/Non-2xx or 3xx responses: (\d+)/.exec(out)?.[1] ?? 0),
    errors: sock ? sock.slice(1).reduce((a, b) => a + Number(b), 0) : 0,
  }
}

let wrkScripts: string | undefined

async function runWrk(o: LoadOptions): Promise<LoadResult> {
  const args = ['-t1', `-c${o.connections}`, `-d${o.seconds}s`, '--latency']
  if (o.method || o.headers || o.body !== undefined) {
    wrkScripts ??= tempDir('fv-bench-wrk-')
    const script = join(wrkScripts, `s${Math.random().toString(36).slice(2)}.lua`)
    const lines = [`wrk.method = ${JSON.stringify(o.method ?? 'GET')}`]
    for (const [k, v] of Object.entries(o.headers ?? {})) lines.push(`wrk.headers[${JSON.stringify(k)}] = ${JSON.stringify(v)}`)
    if (o.body !== undefined) lines.push(`wrk.body = ${JSON.stringify(o.body)}`)
    writeFileSync(script, lines.join('\n'))
    args.push('-s', script)
  }
  args.push(o.url)
  const proc = spawn('wrk', args, { stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  let err = ''
  proc.stdout.on('data', (c: Buffer) => (out += c))
  proc.stderr.on('data', (c: Buffer) => (err += c))
  const code = await new Promise<number | null>((r) => proc.once('close', r))
  if (code !== 0) throw new Error(`wrk exited with ${code}: ${err}`)
  return parseWrk(out)
}

async function runAutocannon(o: LoadOptions): Promise<LoadResult> {
  // Loaded by a computed name: autocannon ships no types and is needed only without wrk.
  const name = 'autocannon'
  const { default: autocannon } = (await import(name)) as { default: (opts: object) => Promise<AutocannonResult> }
  const r = await autocannon({
    url: o.url,
    connections: o.connections,
    duration: o.seconds,
    method: o.method ?? 'GET',
    headers: o.headers,
    body: o.body,
  })
  return {
    tool: 'autocannon',
    rps: r.requests.total / o.seconds,
    p50Ms: r.latency.p50,
    p99Ms: r.latency.p99,
    requests: r.requests.total,
    non2xx: r.non2xx,
    errors: r.errors + r.timeouts,
  }
}

interface AutocannonResult {
  requests: { total: number }
  latency: { p50: number; p99: number }
  non2xx: number
  errors: number
  timeouts: number
}

/** One load run: wrk (one thread) when on PATH, else autocannon in this process. */
export function runLoad(o: LoadOptions): Promise<LoadResult> {
  return haveCommand('wrk') ? runWrk(o) : runAutocannon(o)
}

/** The q-quantile (0…1) of xs, linear between neighbours. */
export function quantile(xs: readonly number[], q: number): number {
  if (xs.length === 0) return NaN
  const s = [...xs].sort((a, b) => a - b)
  const pos = (s.length - 1) * q
  const lo = Math.floor(pos)
  return s[lo]! + (s[Math.min(lo + 1, s.length - 1)]! - s[lo]!) * (pos - lo)
}

export function median(xs: readonly number[]): number {
  if (xs.length === 0) return NaN
  const s = [...xs].sort((a, b) => a - b)
  const mid = s.length >> 1
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2
}

/**
 * Runs `load(target)` for every target in every round, rotating the order each
 * round so no target always goes first (noise on a small machine hits all
 * alike). Returns every run per target name.
 */
export async function interleave<T extends { name: string }>(
  targets: readonly T[],
  rounds: number,
  load: (t: T, round: number) => Promise<LoadResult>,
): Promise<Map<string, LoadResult[]>> {
  const out = new Map<string, LoadResult[]>(targets.map((t) => [t.name, []]))
  for (let round = 0; round < rounds; round++) {
    for (let i = 0; i < targets.length; i++) {
      const t = targets[(i + round) % targets.length]!
      out.get(t.name)!.push(await load(t, round))
    }
  }
  return out
}

/**
 * Median over rounds of the per-round ratio rps(a) / rps(b). Both targets ran
 * in the same round, minutes apart at most, so slow drifts of the machine
 * (other load, thermal, page cache) cancel in each ratio; on a 2-core machine
 * this is far steadier than the ratio of the two medians.
 */
export function pairedRatio(runs: ReadonlyMap<string, readonly LoadResult[]>, a: string, b: string): { median: number; rounds: number[] } {
  const ra = runs.get(a)!
  const rb = runs.get(b)!
  const rounds = ra.map((r, i) => r.rps / rb[i]!.rps)
  return { median: median(rounds), rounds }
}

/** Median rps/p50/p99 of several runs, with the totals of requests, non-2xx and errors. */
export function summarise(runs: readonly LoadResult[]): LoadResult {
  return {
    tool: runs[0]?.tool ?? 'wrk',
    rps: median(runs.map((r) => r.rps)),
    p50Ms: median(runs.map((r) => r.p50Ms)),
    p99Ms: median(runs.map((r) => r.p99Ms)),
    requests: runs.reduce((a, r) => a + r.requests, 0),
    non2xx: runs.reduce((a, r) => a + r.non2xx, 0),
    errors: runs.reduce((a, r) => a + r.errors, 0),
  }
}

/** A plain left-aligned text table (first row = header). */
export function table(rows: readonly (readonly string[])[]): string {
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => (r[c] ?? '').length)))
  return rows
    .map((r) =>
      r
        .map((cell, c) => cell.padEnd(widths[c]!))
        .join('  ')
        .trimEnd(),
    )
    .join('\n')
}

/**
 * CPU time (user + system, µs) a process has used so far, from /proc (Linux);
 * undefined elsewhere. Divided by the requests of a run, it tells where the
 * machine's cores went, which throughput alone hides on a shared machine.
 */
export function cpuMicros(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined
  try {
    return cpuMs(pid) * 1000
  } catch {
    return undefined
  }
}

/**
 * Paired A/B runs: `rounds` pairs, each pair back to back, the order flipped
 * every round (A B, B A, A B, …) so neither side always runs first. On a
 * shared virtual machine whose speed drifts within minutes, short adjacent
 * pairs keep both sides of each ratio under the same conditions.
 */
export async function abPairs<T extends { name: string }>(
  a: T,
  b: T,
  rounds: number,
  load: (t: T) => Promise<LoadResult>,
): Promise<Map<string, LoadResult[]>> {
  const out = new Map<string, LoadResult[]>([
    [a.name, []],
    [b.name, []],
  ])
  for (let round = 0; round < rounds; round++) {
    for (const t of round % 2 === 0 ? [a, b] : [b, a]) out.get(t.name)!.push(await load(t))
  }
  return out
}

/**
 * The bundle of the store benchmarks: `/allow/…` a token bucket that never
 * runs dry, `/reject/…` one token, then 429 for hours; both keyed on x-user.
 */
export function allowRejectBundle(dir: string): string {
  const file = join(dir, 'bundle.json')
  const policy = (id: string, prefix: string, burst: number, rate: number): object => ({
    id,
    spec: {
      selector: { pathPrefix: prefix },
      rules: [
        {
          name: `${id}_rule`,
          limit_keys: ['header:x-user'],
          algorithm: 'token_bucket',
          algorithm_config: { burst, tokens_per_second: rate },
        },
      ],
    },
  })
  writeFileSync(
    file,
    JSON.stringify({ bundle_version: 1, policies: [policy('allow', '/allow/', 1e9, 1e9), policy('reject', '/reject/', 1, 0.0001)] }),
  )
  return file
}

/** Calls per command so far (`INFO commandstats`), by lower-case command name. */
export function commandStats(redis: RedisServer): Map<string, number> {
  const out = new Map<string, number>()
  for (const m of redis.cli('info', 'commandstats').matchAll(/cmdstat_([^:]+):calls=(\d+)/g)) out.set(m[1]!, Number(m[2]))
  return out
}
