/**
 * The store's cost of one check of each limit kind, without the HTTP around
 * it (which dominates the gateway benchmarks and carries their noise):
 *
 *   - in process: ns per MemoryStore.applyNow of one check on a hot key;
 *   - Redis: Redis' own time per EVALSHA of the take script with one check
 *     (`usec_per_call` of INFO commandstats, reset before each batch), on a
 *     redis-server this benchmark starts.
 *
 * Batches of every kind are interleaved (order rotated), and the low
 * quantiles of the batches are reported beside the median: on a shared
 * machine other processes only ever add time, so the fast batches show
 * what a check costs. Limits never reject. Ratios: token bucket / kind
 * (≥ 0.9: the kind costs at most a ninth more).
 *
 *   flock /tmp/fv-heavy.lock node --import tsx test/bench/kind-cost.bench.ts [batches=60] [calls=2000]
 */
import { Redis } from 'ioredis'
import type { Limit } from '../../src/algorithms/algorithm.js'
import { slidingLimit } from '../../src/algorithms/kinds/sliding-window/kind.js'
import { bucketLimit } from '../../src/algorithms/kinds/token-bucket/kind.js'
import { counterLimit } from '../../src/algorithms/kinds/window-counter/kind.js'
import { MemoryStore } from '../../src/store/memory/store.js'
import { redisScripts } from '../../src/store/redis/script.js'
import type { Check } from '../../src/store/store.js'
import { startRedis } from '../helpers/redis-servers.js'
import { quantile, table } from './lib.js'

const BATCHES = Number(process.argv[2] ?? 60)
const CALLS = Number(process.argv[3] ?? 2000)

const KINDS: [string, Limit][] = [
  // A bucket that never fills up again: a full one is forgotten at once (lossless), and every check would then pay for a
  // new counter instead of the kind's maths.
  ['token bucket', bucketLimit(1, 1e12)],
  ['sliding window', slidingLimit(1e12, 60)],
  ['window counter (day)', counterLimit(1e12, 86_400, 0)],
  ['window counter (month)', counterLimit(1e12, -1, 0)],
]

/** ns per applyNow of one check, per batch. */
function inProcess(): Map<string, number[]> {
  const store = new MemoryStore({ maxBytes: 1 << 20 })
  const out = new Map<string, number[]>(KINDS.map(([n]) => [n, []]))
  const checks = KINDS.map(([name, limit]): [string, Check[]] => [name, [{ key: `k:${name}`, limit, cost: 1, shadow: false }]])
  let now = Date.now() / 1000
  for (let b = 0; b < BATCHES * 2; b++) {
    for (let k = 0; k < checks.length; k++) {
      const [name, c] = checks[(b + k) % checks.length]!
      const t = process.hrtime.bigint()
      for (let i = 0; i < CALLS * 10; i++) store.applyNow(c, (now += 1e-6))
      // The first half warms the JIT up.
      if (b >= BATCHES) out.get(name)!.push(Number(process.hrtime.bigint() - t) / (CALLS * 10))
    }
  }
  return out
}

/** Redis µs per EVALSHA of one check, per batch. */
async function onRedis(url: string): Promise<Map<string, number[]>> {
  const r = new Redis(url)
  try {
    const sha = (await r.script('LOAD', redisScripts().take)) as string
    const out = new Map<string, number[]>(KINDS.map(([n]) => [n, []]))
    for (let b = 0; b < BATCHES; b++) {
      for (let k = 0; k < KINDS.length; k++) {
        const [name, limit] = KINDS[(b + k) % KINDS.length]!
        const args = [String(limit.kind.id), ...[0, 1, 2].map((i) => String(limit.params[i] ?? 0)), '1', '0']
        await r.config('RESETSTAT')
        for (let done = 0; done < CALLS; done += 500) {
          const p = r.pipeline()
          for (let i = 0; i < 500; i++) p.evalsha(sha, 1, `k:${name}`, ...args)
          await p.exec()
        }
        const line = (await r.info('commandstats')).split('\n').find((l) => l.startsWith('cmdstat_evalsha'))!
        out.get(name)!.push(Number(/usec_per_call=([\d.]+)/.exec(line)![1]))
      }
    }
    return out
  } finally {
    r.disconnect()
  }
}

function report(title: string, unit: string, runs: Map<string, number[]>): void {
  const rows = [['kind', `min ${unit}`, `p10 ${unit}`, `p25 ${unit}`, `median ${unit}`, 'token bucket / kind (p10)']]
  const base = quantile(runs.get('token bucket')!, 0.1)
  for (const [name, xs] of runs) {
    const q = (p: number): string => quantile(xs, p).toFixed(unit === 'ns' ? 0 : 2)
    rows.push([name, q(0), q(0.1), q(0.25), q(0.5), (base / quantile(xs, 0.1)).toFixed(3)])
  }
  console.log(`\n${title}\n`)
  console.log(table(rows))
}

const redis = await startRedis()
try {
  report(`In process: ns per check (MemoryStore.applyNow), ${BATCHES} batches of ${CALLS * 10}; node ${process.version}`, 'ns', inProcess())
  report(`Redis: µs of Redis time per EVALSHA of one check, ${BATCHES} batches of ${CALLS} (pipelined)`, 'µs', await onRedis(redis.url))
} finally {
  await redis.stop()
}
