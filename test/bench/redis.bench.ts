/**
 * The gateway with the in-process store vs with Redis, in one run: requests/s
 * and p99 on the allow path and on the reject path, and Redis commands per
 * request (from INFO commandstats around each Redis run: must be 1.0, one
 * EVALSHA). Redis mode must reach ≥ 0.85 of in-process mode on the allow path.
 *
 *   flock /tmp/fv-heavy.lock npm run bench -- redis [seconds=5] [rounds=3] [connections=32]
 *
 * Each gateway is a child process in front of a backend child process; the
 * Redis is a redis-server this benchmark starts (so nobody else's traffic is
 * counted). Runs of the four targets are interleaved, the median per target
 * is reported.
 */
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { interleave, pairedRatio, runLoad, startBackendProcess, startGatewayProcess, stopAll, summarise, table, tempDir, type LoadResult, type Running } from './lib.js'
import { startRedis, type RedisServer } from '../store/redis-servers.js'

const [seconds = 5, rounds = 5, connections = 32] = process.argv.slice(2).map(Number)

function bundle(dir: string): string {
  const file = join(dir, 'bundle.json')
  const policy = (id: string, prefix: string, burst: number, rate: number): object => ({
    id,
    spec: { selector: { pathPrefix: prefix }, rules: [{ name: `${id}_rule`, limit_keys: ['header:x-user'], algorithm: 'token_bucket', algorithm_config: { burst, tokens_per_second: rate } }] },
  })
  // /allow/: a bucket that never runs dry; /reject/: one token, then 429 for hours.
  writeFileSync(file, JSON.stringify({ bundle_version: 1, policies: [policy('allow', '/allow/', 1e9, 1e9), policy('reject', '/reject/', 1, 0.0001)] }))
  return file
}

interface Target {
  name: string
  store: 'memory' | 'redis'
  path: string
  gw: Running
}

/** Commands the token-bucket script runs inside its EVALSHA (counted by Redis, but not sent by the gateway). */
const INSIDE_SCRIPT = new Set(['time', 'get', 'set'])

function commandStats(redis: RedisServer): Map<string, number> {
  const out = new Map<string, number>()
  for (const m of redis.cli('info', 'commandstats').matchAll(/cmdstat_([^:]+):calls=(\d+)/g)) out.set(m[1]!, Number(m[2]))
  return out
}

async function main(): Promise<void> {
  const dir = tempDir('fv-bench-redis-')
  const file = bundle(dir)
  const redis = await startRedis()
  try {
    const backend = await startBackendProcess()
    const env = { FAIRVISOR_BACKEND_URL: backend.url, FAIRVISOR_CONFIG_FILE: file, FAIRVISOR_LOG_LEVEL: 'info' }
    const memGw = await startGatewayProcess({ ...env, FAIRVISOR_STORE: 'memory' })
    const redisGw = await startGatewayProcess({ ...env, FAIRVISOR_STORE: redis.url })
    const targets: Target[] = [
      { name: 'memory allow', store: 'memory', path: '/allow/x', gw: memGw },
      { name: 'redis allow', store: 'redis', path: '/allow/x', gw: redisGw },
      { name: 'memory reject', store: 'memory', path: '/reject/x', gw: memGw },
      { name: 'redis reject', store: 'redis', path: '/reject/x', gw: redisGw },
    ]
    // Warm up both gateways (JIT, connection pools, script cache) and drain the reject buckets.
    for (const t of targets) await runLoad({ url: t.gw.url + t.path, connections, seconds: 1, headers: { 'x-user': 'bench' } })
    const perRequest = new Map<string, number[]>()
    const runs = await interleave(targets, rounds, async (t) => {
      const before = t.store === 'redis' ? commandStats(redis) : undefined
      const r: LoadResult = await runLoad({ url: t.gw.url + t.path, connections, seconds, headers: { 'x-user': 'bench' } })
      if (before) {
        const after = commandStats(redis)
        // Commands the gateway sent: everything but our own INFO and the calls the script makes inside its one atomic run.
        let calls = 0
        for (const [name, n] of after) if (!INSIDE_SCRIPT.has(name) && name !== 'info') calls += n - (before.get(name) ?? 0)
        const list = perRequest.get(t.name) ?? []
        list.push(calls / r.requests)
        perRequest.set(t.name, list)
        const cmds = [...after].filter(([n, c]) => n !== 'info' && c !== (before.get(n) ?? 0)).map(([n, c]) => `${n}=${c - (before.get(n) ?? 0)}`).join(' ')
        console.log(`  ${t.name}: ${r.requests} requests, ${Math.round(r.rps)} req/s; redis commands: ${cmds}`)
      } else console.log(`  ${t.name}: ${r.requests} requests, ${Math.round(r.rps)} req/s`)
      return r
    })
    const s = new Map([...runs].map(([k, v]) => [k, summarise(v)]))
    const rows = [['target', 'req/s (median)', 'p50 ms', 'p99 ms', 'requests', 'non-2xx', 'errors', 'redis cmds/request']]
    for (const t of targets) {
      const r = s.get(t.name)!
      const cpr = perRequest.get(t.name)
      rows.push([t.name, Math.round(r.rps).toString(), r.p50Ms.toFixed(2), r.p99Ms.toFixed(2), String(r.requests), String(r.non2xx), String(r.errors), cpr ? cpr.map((x) => x.toFixed(3)).join(' / ') : '-'])
    }
    console.log(`\n${runs.get('memory allow')![0]!.tool}, ${connections} connections, ${seconds} s × ${rounds} rounds per target, interleaved\n`)
    console.log(table(rows))
    // Verdict on the median of per-round ratios (see pairedRatio); the ratio of medians is printed beside it.
    const allowPaired = pairedRatio(runs, 'redis allow', 'memory allow')
    const allow = allowPaired.median
    const reject = pairedRatio(runs, 'redis reject', 'memory reject').median
    console.log(`\nredis / in-process: allow ${allow.toFixed(3)} (must be ≥ 0.85; per round ${allowPaired.rounds.map((x) => x.toFixed(3)).join(', ')}; ratio of medians ${(s.get('redis allow')!.rps / s.get('memory allow')!.rps).toFixed(3)}), reject ${reject.toFixed(3)}`)
    const cmds = perRequest.get('redis allow')!
    console.log(`redis commands per request on the allow path: ${cmds.map((x) => x.toFixed(3)).join(', ')} (must be 1.0)`)
    if (allow < 0.85) process.exitCode = 1
    if (cmds.some((x) => Math.abs(x - 1) > 0.005)) process.exitCode = 1
  } finally {
    await stopAll()
    await redis.stop()
  }
}

await main()
