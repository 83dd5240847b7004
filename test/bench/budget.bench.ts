/**
 * Allow-path cost of a spend budget: requests/s of one cost_based rule (budget
 * so large it never rejects; a warn stage at 90 % that is never reached)
 * against one token_bucket rule (burst so large it never rejects), both
 * keyed on one header value and proxied to the same backend, with the
 * in-process store and with Redis. Target: budget / token bucket ≥ 0.9.
 *
 *   npm run build && flock /tmp/fv-heavy.lock node --import tsx test/bench/budget.bench.ts [--no-pin] [seconds=2] [pairs=6] [instances=2] [connections=64]
 *
 * One bundle holds both rules on two path prefixes, so each comparison runs
 * on the same gateway process (no JIT or start-order difference between the
 * sides). Per store, `instances` fresh gateways are started; each is warmed
 * up on both paths and then run in `pairs` adjacent pairs, order flipped
 * every pair (abPairs). The verdict per store is the ratio of total requests
 * (as in redis.bench.ts), with the median of pair ratios beside it. The Redis
 * is a redis-server this benchmark starts. CPU placement as in
 * redis.bench.ts: gateway on CPU 0, everything else on the other CPUs.
 */
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { abPairs, median, pairedRatio, runLoad, summarise, table, tempDir, type LoadResult, type Running } from './lib.js'
import { benchArgs, RESULT_HEADER, resultRow, startStoreBench, totalRequests } from './store-bench.js'

const { noPin, nums } = benchArgs()
const [seconds = 2, pairs = 6, instances = 2, connections = 64] = nums

function bundle(dir: string): string {
  const file = join(dir, 'bundle.json')
  const policy = (id: string, rule: object): object => ({ id, spec: { selector: { pathPrefix: `/${id}/` }, rules: [rule] } })
  writeFileSync(
    file,
    JSON.stringify({
      bundle_version: 1,
      policies: [
        policy('budget', {
          name: 'bench_budget',
          limit_keys: ['header:x-user'],
          algorithm: 'cost_based',
          algorithm_config: {
            budget: 1e12,
            period: '1d',
            staged_actions: [
              { threshold_percent: 90, action: 'warn' },
              { threshold_percent: 100, action: 'reject' },
            ],
          },
        }),
        policy('bucket', {
          name: 'bench_bucket',
          limit_keys: ['header:x-user'],
          algorithm: 'token_bucket',
          algorithm_config: { burst: 1e9, tokens_per_second: 1e9 },
        }),
      ],
    }),
  )
  return file
}

interface Target {
  name: string
  path: string
  gw: Running
}

async function main(): Promise<void> {
  const bench = await startStoreBench({ bundleFile: bundle(tempDir('fv-bench-budget-')), pin: !noPin })
  try {
    const stores = [
      ['memory', 'memory'],
      ['redis', bench.redis.url],
    ] as const
    const runs = new Map<string, LoadResult[]>()
    const load = async (t: Target): Promise<LoadResult> => {
      const r = await runLoad({ url: t.gw.url + t.path, connections, seconds, headers: { 'x-user': 'bench' } })
      if (r.non2xx > 0 || r.errors > 0) throw new Error(`${t.name}: ${r.non2xx} non-2xx answers, ${r.errors} errors: the setup is wrong`)
      return r
    }
    for (let i = 0; i < instances; i++) {
      for (const [store, url] of stores) {
        const gw = await bench.gateway(url)
        const budget: Target = { name: `${store} budget`, path: '/budget/x', gw }
        const bucket: Target = { name: `${store} token bucket`, path: '/bucket/x', gw }
        // Warm up (JIT, connection pools, script cache); the first side alternates per instance.
        for (const t of i % 2 === 0 ? [budget, bucket] : [bucket, budget]) await load({ ...t, name: `${t.name} (warm-up)` })
        const r = await abPairs(i % 2 === 0 ? budget : bucket, i % 2 === 0 ? bucket : budget, pairs, load)
        for (const [k, v] of r) runs.set(k, [...(runs.get(k) ?? []), ...v])
        const m = (n: string): number => Math.round(median(r.get(n)!.map((x) => x.rps)))
        console.log(
          `  instance ${i + 1}/${instances}, ${store}: budget ${m(budget.name)} vs token bucket ${m(bucket.name)} req/s (median of pair ratios ${pairedRatio(r, budget.name, bucket.name).median.toFixed(3)})`,
        )
        await gw.stop()
      }
    }
    const rows = [RESULT_HEADER]
    for (const [store] of stores) {
      for (const name of [`${store} budget`, `${store} token bucket`]) rows.push(resultRow(name, summarise(runs.get(name)!)))
    }
    const placement = bench.placement('load generator + backend + Redis')
    console.log(
      `\n${runs.get('memory budget')![0]!.tool}, ${connections} connections, ${seconds} s per run; ${instances} instances × ${pairs} adjacent pairs per store; ${placement}; node ${process.version}\n`,
    )
    console.log(table(rows))
    console.log('')
    const total = (n: string): number => totalRequests(runs, n)
    let ok = true
    for (const [store] of stores) {
      const a = `${store} budget`
      const b = `${store} token bucket`
      const ratio = total(a) / total(b)
      const p = pairedRatio(runs, a, b)
      ok &&= ratio >= 0.9
      console.log(
        `${store}: budget / token bucket = ${ratio.toFixed(3)} (ratio of total requests; median of ${p.rounds.length} pair ratios ${p.median.toFixed(3)}, range ${Math.min(...p.rounds).toFixed(2)}–${Math.max(...p.rounds).toFixed(2)}); target ≥ 0.9: ${ratio >= 0.9 ? 'met' : 'MISSED'}`,
      )
    }
    if (!ok) process.exitCode = 1
  } finally {
    await bench.stop()
  }
}

await main()
