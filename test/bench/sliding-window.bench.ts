/**
 * Decision cost of a sliding window: decisions/s of the decision service
 * (POST /v1/decision, allowed) for one sliding_window rule (a limit so large
 * it never rejects) against one token_bucket rule (never rejects), both keyed
 * on one header value, with the in-process store and with Redis. Target:
 * sliding window / token bucket ≥ 0.9.
 *
 *   npm run build && flock /tmp/fv-heavy.lock node --import tsx test/bench/sliding-window.bench.ts [--no-pin] [seconds=2] [pairs=6] [instances=2] [connections=64]
 *
 * As budget.bench.ts: one bundle holds both rules on two path prefixes (the
 * decision request's X-Original-URI picks one), so each comparison runs on
 * the same gateway process; per store, `instances` fresh gateways, each
 * warmed up on both paths and run in `pairs` adjacent pairs, order flipped
 * every pair. The verdict per store is the ratio of total requests, with the
 * median of pair ratios beside it. Gateway on CPU 0, load generator and
 * Redis on the others.
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
        policy('sliding', {
          name: 'bench_sliding',
          limit_keys: ['header:x-user'],
          algorithm: 'sliding_window',
          algorithm_config: { limit: 1e12, window_seconds: 60 },
        }),
        // A bucket that never fills up again, as the window keeps its counts: a full bucket is forgotten at once
        // (lossless), and each decision would then pay for a new counter rather than for the bucket's maths.
        policy('bucket', {
          name: 'bench_bucket',
          limit_keys: ['header:x-user'],
          algorithm: 'token_bucket',
          algorithm_config: { burst: 1e12, tokens_per_second: 1 },
        }),
      ],
    }),
  )
  return file
}

interface Target {
  name: string
  uri: string
  gw: Running
}

async function main(): Promise<void> {
  const bench = await startStoreBench({
    bundleFile: bundle(tempDir('fv-bench-sliding-')),
    pin: !noPin,
    env: { FAIRVISOR_MODE: 'decision_service' },
  })
  try {
    const stores = [
      ['memory', 'memory'],
      ['redis', bench.redis.url],
    ] as const
    const runs = new Map<string, LoadResult[]>()
    const load = async (t: Target): Promise<LoadResult> => {
      const headers = { 'x-original-uri': t.uri, 'x-original-method': 'GET', 'x-user': 'bench' }
      const r = await runLoad({ url: `${t.gw.url}/v1/decision`, method: 'POST', connections, seconds, headers })
      if (r.non2xx > 0 || r.errors > 0) throw new Error(`${t.name}: ${r.non2xx} non-2xx answers, ${r.errors} errors: the setup is wrong`)
      return r
    }
    for (let i = 0; i < instances; i++) {
      for (const [store, url] of stores) {
        const gw = await bench.gateway(url)
        const sliding: Target = { name: `${store} sliding window`, uri: '/sliding/x', gw }
        const bucket: Target = { name: `${store} token bucket`, uri: '/bucket/x', gw }
        // Warm up (JIT, connection pools, script cache); the first side alternates per instance.
        for (const t of i % 2 === 0 ? [sliding, bucket] : [bucket, sliding]) await load({ ...t, name: `${t.name} (warm-up)` })
        const r = await abPairs(i % 2 === 0 ? sliding : bucket, i % 2 === 0 ? bucket : sliding, pairs, load)
        for (const [k, v] of r) runs.set(k, [...(runs.get(k) ?? []), ...v])
        const m = (n: string): number => Math.round(median(r.get(n)!.map((x) => x.rps)))
        console.log(
          `  instance ${i + 1}/${instances}, ${store}: sliding window ${m(sliding.name)} vs token bucket ${m(bucket.name)} decisions/s (median of pair ratios ${pairedRatio(r, sliding.name, bucket.name).median.toFixed(3)})`,
        )
        await gw.stop()
      }
    }
    const rows = [RESULT_HEADER]
    for (const [store] of stores) {
      for (const name of [`${store} sliding window`, `${store} token bucket`]) rows.push(resultRow(name, summarise(runs.get(name)!)))
    }
    const placement = bench.placement('load generator + Redis')
    console.log(
      `\n${runs.get('memory sliding window')![0]!.tool}, ${connections} connections, ${seconds} s per run; ${instances} instances × ${pairs} adjacent pairs per store; ${placement}; node ${process.version}\n`,
    )
    console.log(table(rows))
    console.log('')
    let ok = true
    for (const [store] of stores) {
      const a = `${store} sliding window`
      const b = `${store} token bucket`
      const ratio = totalRequests(runs, a) / totalRequests(runs, b)
      const p = pairedRatio(runs, a, b)
      ok &&= ratio >= 0.9
      console.log(
        `${store}: sliding window / token bucket = ${ratio.toFixed(3)} (ratio of total requests; median of ${p.rounds.length} pair ratios ${p.median.toFixed(3)}, range ${Math.min(...p.rounds).toFixed(2)}–${Math.max(...p.rounds).toFixed(2)}); target ≥ 0.9: ${ratio >= 0.9 ? 'met' : 'MISSED'}`,
      )
    }
    if (!ok) process.exitCode = 1
  } finally {
    await bench.stop()
  }
}

await main()
