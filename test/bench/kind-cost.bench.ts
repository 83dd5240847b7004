/**
 * The store's cost of one check of each limit kind, without the HTTP around
 * it (which dominates the gateway benchmarks and carries their noise):
 *
 *   - in process: ns per MemoryStore.applyNow of one check on a hot key;
 *   - Redis: Redis' own time per EVALSHA of the take script with one check
 *     (the `usec` of INFO commandstats, reset before each batch, per check),
 *     on a redis-server this benchmark starts.
 *
 * A concurrency slot is a take and, when its request ends, a give-back: its
 * second row times both, the give-back as the gateway makes it in process
 * (a decrement in place, Store.adjustNow) and on Redis as one adjust script
 * call per request (the gateway sends a turn's give-backs in one).
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
import { concurrencyLimit } from '../../src/algorithms/kinds/concurrency/kind.js'
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
  // Never full: every check a take (the give-back is timed on its own row below).
  ['concurrency', concurrencyLimit(1e12, 300)],
]

/** A concurrency slot taken and given back, as a request through the gateway does (the give-back as http/slot-holds.ts makes it). */
const SLOT = 'concurrency, take + give-back'
const slotLimit = concurrencyLimit(1e6, 300)

/** ns per applyNow of one check, per batch. */
function inProcess(): Map<string, number[]> {
  const store = new MemoryStore({ maxBytes: 1 << 20 })
  const out = new Map<string, number[]>([...KINDS.map(([n]): [string, number[]] => [n, []]), [SLOT, []]])
  const checks = KINDS.map(([name, limit]): [string, Check[]] => [name, [{ key: `k:${name}`, limit, cost: 1, shadow: false }]])
  const slot: Check[] = [{ key: 'k:slot', limit: slotLimit, cost: 1, shadow: false }]
  checks.push([SLOT, slot])
  let now = Date.now() / 1000
  for (let b = 0; b < BATCHES * 2; b++) {
    for (let k = 0; k < checks.length; k++) {
      const [name, c] = checks[(b + k) % checks.length]!
      const t = process.hrtime.bigint()
      if (c === slot)
        for (let i = 0; i < CALLS * 10; i++) {
          const at = (now += 1e-6)
          store.applyNow(c, at)
          store.adjustNow({ key: 'k:slot', limit: slotLimit, amount: 1, at }, at)
        }
      else for (let i = 0; i < CALLS * 10; i++) store.applyNow(c, (now += 1e-6))
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
    const adjustSha = (await r.script('LOAD', redisScripts().adjust)) as string
    const out = new Map<string, number[]>([...KINDS.map(([n]): [string, number[]] => [n, []]), [SLOT, []]])
    const rows: [string, Limit][] = [...KINDS, [SLOT, slotLimit]]
    const params = (limit: Limit): string[] => [String(limit.kind.id), ...[0, 1, 2].map((i) => String(limit.params[i] ?? 0))]
    for (let b = 0; b < BATCHES; b++) {
      for (let k = 0; k < rows.length; k++) {
        const [name, limit] = rows[(b + k) % rows.length]!
        const args = [...params(limit), '1', '0']
        await r.config('RESETSTAT')
        for (let done = 0; done < CALLS; done += 500) {
          const p = r.pipeline()
          for (let i = 0; i < 500; i++) {
            p.evalsha(sha, 1, `k:${name}`, ...args)
            // The give-back, one script call per request here (the gateway sends a turn's together, in one).
            if (name === SLOT) p.evalsha(adjustSha, 1, `k:${name}`, ...params(limit), '1', String(Date.now() / 1000))
          }
          await p.exec()
        }
        const line = (await r.info('commandstats')).split('\n').find((l) => l.startsWith('cmdstat_evalsha'))!
        // Redis time per request: a take, and for a slot its give-back too.
        out.get(name)!.push(Number(/usec=(\d+)/.exec(line)![1]) / CALLS)
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
  report(`Redis: µs of Redis time per check (EVALSHA), ${BATCHES} batches of ${CALLS} (pipelined)`, 'µs', await onRedis(redis.url))
} finally {
  await redis.stop()
}
