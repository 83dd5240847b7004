/**
 * Token leases on a hot key: two gateway instances on one Redis (a
 * redis-server this benchmark starts), one key, wrk on each instance at
 * once. Exact mode (one EVALSHA per request) against leases of 20 tokens
 * (ttl 200 ms), in alternating rounds; per mode: requests/s of both
 * instances together, Redis calls per request (`INFO commandstats`, EVALSHA
 * calls ÷ answered requests), and, in a second scenario where the key is
 * over its limit, the over-grant against the exact limit.
 *
 *   npm run build && flock /tmp/fv-heavy.lock node --import tsx test/bench/lease.bench.ts [seconds=3] [rounds=3] [connections=32]
 *
 * No CPU pinning: the two instances, wrk, the backend and Redis share the
 * two cores, as both modes do alike.
 *
 * First, in this process: the leasing layer's own cost per request spent
 * from a lease (over a store that grants at once, so only the lease table's
 * hashing, locking and bookkeeping is timed).
 */
import { writeFileSync } from 'node:fs'
import type { LeaseDescription } from '../../src/algorithms/algorithm.js'
import { bucketLimit, type BucketLimit } from '../../src/algorithms/kinds/token-bucket/kind.js'
import { LeasingStore } from '../../src/store/leasing.js'
import type { Store } from '../../src/store/store.js'
import { join } from 'node:path'
import { commandStats, runLoad, startBackendProcess, startGatewayProcess, stopAll, table, tempDir, type LoadResult } from './lib.js'
import { startRedis, type RedisServer } from '../helpers/redis-servers.js'

const [seconds = 3, rounds = 3, connections = 32] = process.argv.slice(2).map(Number)
const dir = tempDir('fv-bench-lease-')
let files = 0

function bundle(rule: string, config: object): string {
  const file = join(dir, `b${++files}.json`)
  writeFileSync(
    file,
    JSON.stringify({
      bundle_version: 1,
      policies: [
        {
          id: 'hot',
          spec: {
            selector: { pathPrefix: '/' },
            rules: [{ name: rule, limit_keys: ['header:x-tenant'], algorithm: 'token_bucket', algorithm_config: config }],
          },
        },
      ],
    }),
  )
  return file
}

const evalsha = (redis: RedisServer): number => commandStats(redis).get('evalsha') ?? 0

interface Run {
  rps: number
  requests: number
  ok: number
  calls: number
  seconds: number
}

async function run(redis: RedisServer, backendUrl: string, file: string): Promise<Run> {
  const env = {
    FAIRVISOR_BACKEND_URL: backendUrl,
    FAIRVISOR_CONFIG_FILE: file,
    FAIRVISOR_STORE: redis.url,
    FAIRVISOR_REDIS_TIMEOUT_MS: '1000',
  }
  const gws = [await startGatewayProcess(env), await startGatewayProcess(env)]
  try {
    // Warm-up: JIT, connections, script cache.
    await Promise.all(gws.map((g) => runLoad({ url: `${g.url}/x`, connections: 8, seconds: 1, headers: { 'x-tenant': 'warm' } })))
    const before = evalsha(redis)
    const results: LoadResult[] = await Promise.all(
      gws.map((g) => runLoad({ url: `${g.url}/x`, connections, seconds, headers: { 'x-tenant': 'hot' } })),
    )
    const requests = results.reduce((a, r) => a + r.requests, 0)
    // The measured window: the longest of the two runs (requests ÷ requests/s).
    const elapsed = Math.max(...results.map((r) => r.requests / r.rps))
    return {
      rps: results.reduce((a, r) => a + r.rps, 0),
      requests,
      ok: requests - results.reduce((a, r) => a + r.non2xx, 0),
      calls: evalsha(redis) - before,
      seconds: elapsed,
    }
  } finally {
    await Promise.all(gws.map((g) => g.stop()))
  }
}

/** ns per apply() of a leased check spent locally (64 hot keys, a fresh key string per request as the engine builds it). */
async function layerNs(n = 2_000_000): Promise<number> {
  const granting: Store = {
    kind: 'granting',
    apply: (checks, _now, done) =>
      done(
        null,
        checks.map(() => ({ allowed: true, value: 1e9, retryAfter: 0 })),
      ),
    adjust: (_a, _now, done) => done(null),
    state: () => 'ok',
    ready: async () => true,
    close: async () => undefined,
  }
  const limit = { ...bucketLimit(1e9, 1e12), lease: { tokens: 1000, ttlMs: 60_000 } as LeaseDescription } as BucketLimit
  const s = new LeasingStore(granting, Date.now)
  let ok = 0
  const t0 = process.hrtime.bigint()
  for (let i = 0; i < n; i++)
    s.apply([{ key: `tb:per_tenant:tenant-${i & 63}`, limit, cost: 1, shadow: false }], 0, (_e, o) => void (o?.[0]?.allowed && ok++))
  const ns = Number(process.hrtime.bigint() - t0) / n
  await s.close()
  if (ok !== n) throw new Error(`${n - ok} requests not granted`)
  return ns
}

async function main(): Promise<void> {
  await layerNs(200_000) // warm-up (JIT)
  console.log(`leasing layer: ${(await layerNs()).toFixed(0)} ns per request spent from a lease (in process)`)
  const redis = await startRedis()
  const backend = await startBackendProcess()
  try {
    const modes = [
      ['exact', undefined],
      ['lease 20 / 200 ms', { tokens: 20, ttl_ms: 200 }],
    ] as const
    const under = new Map<string, Run[]>()
    for (let r = 0; r < rounds; r++) {
      for (const [name, lease] of r % 2 ? [...modes].reverse() : modes) {
        // Under the limit: every request allowed, the cost of the store calls shows.
        const file = bundle(`under${files}`, { tokens_per_second: 1e6, burst: 1e6, ...(lease ? { lease } : {}) })
        const x = await run(redis, backend.url, file)
        under.set(name, [...(under.get(name) ?? []), x])
        console.log(`  round ${r + 1}, ${name}: ${Math.round(x.rps)} req/s, ${(x.calls / x.requests).toFixed(3)} Redis calls per request`)
      }
    }
    // Over the limit: 500 tokens/s, burst 500 on one key; the exact ceiling is burst + rate × seconds.
    const over = new Map<string, Run>()
    for (const [name, lease] of modes)
      over.set(
        name,
        await run(redis, backend.url, bundle(`over${files}`, { tokens_per_second: 500, burst: 500, ...(lease ? { lease } : {}) })),
      )
    const rows = [['mode', 'req/s (under the limit)', 'Redis calls / request', 'granted over the limit', 'exact ceiling', 'over-grant']]
    for (const [name] of modes) {
      const u = under.get(name)!
      const rps = u.reduce((a, x) => a + x.rps, 0) / u.length
      const calls = u.reduce((a, x) => a + x.calls, 0) / u.reduce((a, x) => a + x.requests, 0)
      const o = over.get(name)!
      const ceiling = Math.round(500 + 500 * o.seconds)
      rows.push([name, String(Math.round(rps)), calls.toFixed(3), String(o.ok), String(ceiling), String(Math.max(0, o.ok - ceiling))])
    }
    console.log(
      `\n2 gateway instances on one Redis, wrk -t1 -c${connections} on each, ${seconds} s per run, ${rounds} alternating rounds; node ${process.version}\n`,
    )
    console.log(table(rows))
    const e = under.get('exact')!
    const l = under.get(modes[1][0])!
    const ratio = l.reduce((a, x) => a + x.requests, 0) / e.reduce((a, x) => a + x.requests, 0)
    const leaseCalls = l.reduce((a, x) => a + x.calls, 0) / l.reduce((a, x) => a + x.requests, 0)
    console.log(
      `\nleases / exact requests/s = ${ratio.toFixed(3)}; Redis calls per request with leases ${leaseCalls.toFixed(3)} (target ≤ 0.1: ${leaseCalls <= 0.1 ? 'met' : 'MISSED'})`,
    )
    if (leaseCalls > 0.1) process.exitCode = 1
  } finally {
    await stopAll()
    await redis.stop()
  }
}

await main()
