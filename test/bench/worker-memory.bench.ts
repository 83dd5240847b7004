/**
 * Resident memory of the real gateway per FAIRVISOR_WORKERS, for sizing a
 * container's memory limit (docs/deploy.md#sizing-workers-cpu-and-memory).
 * For each worker count: the reverse proxy in front of a small backend, the
 * in-process store at its default bound, the example bundle
 * policies/per-api-key.json; RSS (the whole process: every worker thread and
 * the shared table) once ready and idle, then under `seconds` of wrk load
 * (one thread, `connections` keep-alive connections) first on one API key,
 * then on `keys` distinct API keys drawn at random (each key's first requests
 * pass: mostly 200s, proxied). Peak is the kernel's high-water mark (VmHWM).
 *
 *   npm run bench -- worker-memory [workers=1,2,4] [seconds=30] [keys=200000] [connections=32]
 *
 * Needs wrk on PATH. The machine is shared: run it under the lock
 * (`flock /tmp/fv-heavy.lock npm run bench -- worker-memory`).
 */
import { spawn } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { haveCommand, ROOT, type Running, startBackendProcess, startGatewayProcess, stopAll, table, tempDir } from './lib.js'

const counts = (process.argv[2] ?? '1,2,4').split(',').map(Number)
const seconds = Number(process.argv[3] ?? 30)
const keys = Number(process.argv[4] ?? 200_000)
const connections = Number(process.argv[5] ?? 32)
const MB = 2 ** 20

/** VmRSS and VmHWM of a process, in MiB (Linux). */
function memory(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  const kb = (field: string): number => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)![1]) * 1024
  return { rss: kb('VmRSS') / MB, peak: kb('VmHWM') / MB }
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

/** wrk with a Lua script: X-Api-Key fixed, or drawn from `n` keys per request. */
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

if (!haveCommand('wrk')) {
  console.error('worker-memory: wrk is not on PATH (Debian: apt-get install wrk)')
  process.exit(2)
}
const dir = tempDir('fv-bench-mem-')
const oneKey = join(dir, 'one.lua')
writeFileSync(oneKey, 'wrk.headers["X-Api-Key"] = "k-1"\n')
const manyKeys = join(dir, 'many.lua')
writeFileSync(
  manyKeys,
  `math.randomseed(os.time())\nrequest = function()\n  return wrk.format("GET", nil, { ["X-Api-Key"] = "k-" .. math.random(${keys}) })\nend\n`,
)

const backend = await startBackendProcess()
const rows = [
  ['workers', 'idle MiB', 'one key: RSS / peak MiB', `${keys} keys: RSS / peak MiB`, 'peak − idle', 'requests (non-2xx), one key / many'],
]
for (const n of counts) {
  const gw = await startGatewayProcess({
    FAIRVISOR_BACKEND_URL: backend.url,
    FAIRVISOR_CONFIG_FILE: join(ROOT, 'policies/per-api-key.json'),
    FAIRVISOR_STORE: 'memory',
    FAIRVISOR_WORKERS: String(n),
  })
  const pid = gw.proc.pid!
  await ready(gw)
  const idle = await settled(pid)
  const one = await wrk(gw.url, oneKey)
  const afterOne = memory(pid)
  const many = await wrk(gw.url, manyKeys)
  const afterMany = memory(pid)
  rows.push([
    String(n),
    idle.toFixed(0),
    `${afterOne.rss.toFixed(0)} / ${afterOne.peak.toFixed(0)}`,
    `${afterMany.rss.toFixed(0)} / ${afterMany.peak.toFixed(0)}`,
    (afterMany.peak - idle).toFixed(0),
    `${one.requests} (${one.non2xx}) / ${many.requests} (${many.non2xx})`,
  ])
  console.log(`workers=${n} done`)
  await gw.stop()
}
await stopAll()
console.log(
  `\nRSS of the gateway process (every thread), reverse proxy, in-process store (FAIRVISOR_SHARED_DICT_SIZE default), policies/per-api-key.json, wrk -t1 -c${connections} -d${seconds}s, Node ${process.versions.node}:\n`,
)
console.log(table(rows))
