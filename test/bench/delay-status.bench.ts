/**
 * Allow-path cost of the two rule options that act around the request:
 *
 * - a token_bucket with `max_delay_ms` (burst so large it never goes into
 *   debt, so no request is held: what the option costs every request) against
 *   the same bucket without it. Target: delay / plain ≥ 0.9;
 * - a token_bucket with `count_statuses: ["401"]` whose backend answers 200,
 *   so every request is charged and given back after the response (one store
 *   adjust each), against the plain bucket. Reported, no target: it is one
 *   more store call per request.
 *
 *   npm run build && flock /tmp/fv-heavy.lock node --import tsx test/bench/delay-status.bench.ts [--no-pin] [seconds=2] [pairs=6] [instances=2] [connections=64]
 *
 * One bundle holds the three rules on three path prefixes, so each comparison
 * runs on the same gateway process. Per store (in-process, Redis), `instances`
 * fresh gateways are started; each is warmed up on every path and then runs
 * `pairs` adjacent pairs per comparison, order flipped every pair (abPairs).
 * The verdict is the ratio of total requests, with the median of the pair
 * ratios beside it. Placement and Redis as in budget.bench.ts.
 */
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { abPairs, median, pairedRatio, runLoad, summarise, table, tempDir, type LoadResult, type Running } from './lib.js'
import { benchArgs, RESULT_HEADER, resultRow, startStoreBench, totalRequests } from './store-bench.js'

const { noPin, nums } = benchArgs()
const [seconds = 2, pairs = 6, instances = 2, connections = 64] = nums

function bundle(dir: string): string {
  const file = join(dir, 'bundle.json')
  const policy = (id: string, extra: object, config: object = {}): object => ({
    id,
    spec: {
      selector: { pathPrefix: `/${id}/` },
      rules: [
        {
          name: `bench_${id}`,
          limit_keys: ['header:x-user'],
          algorithm: 'token_bucket',
          algorithm_config: { burst: 1e9, tokens_per_second: 1e9, ...config },
          ...extra,
        },
      ],
    },
  })
  writeFileSync(
    file,
    JSON.stringify({
      bundle_version: 1,
      policies: [policy('plain', {}), policy('delay', {}, { max_delay_ms: 2000 }), policy('status', { count_statuses: ['401'] })],
    }),
  )
  return file
}

interface Target {
  name: string
  path: string
  gw: Running
}

const COMPARISONS = [
  ['delay', 'max_delay_ms', 0.9],
  ['status', 'count_statuses', undefined],
] as const

async function main(): Promise<void> {
  const bench = await startStoreBench({ bundleFile: bundle(tempDir('fv-bench-delay-')), pin: !noPin })
  try {
    const stores = [
      ['memory', 'memory'],
      ['redis', bench.redis.url],
    ] as const
    /** Per store and comparison: the runs of both sides, pair by pair. */
    const runs = new Map<string, Map<string, LoadResult[]>>()
    const load = async (t: Target): Promise<LoadResult> => {
      const r = await runLoad({ url: t.gw.url + t.path, connections, seconds, headers: { 'x-user': 'bench' } })
      if (r.non2xx > 0 || r.errors > 0) throw new Error(`${t.name}: ${r.non2xx} non-2xx answers, ${r.errors} errors: the setup is wrong`)
      return r
    }
    for (let i = 0; i < instances; i++) {
      for (const [store, url] of stores) {
        const gw = await bench.gateway(url)
        const plain: Target = { name: `${store} plain`, path: '/plain/x', gw }
        for (const [id] of COMPARISONS) await load({ name: `${store} ${id} (warm-up)`, path: `/${id}/x`, gw })
        await load({ ...plain, name: `${plain.name} (warm-up)` })
        for (const [id, label] of COMPARISONS) {
          const other: Target = { name: `${store} ${label}`, path: `/${id}/x`, gw }
          const r = await abPairs(i % 2 === 0 ? other : plain, i % 2 === 0 ? plain : other, pairs, load)
          const key = `${store} ${id}`
          const all = runs.get(key) ?? new Map<string, LoadResult[]>()
          for (const [k, v] of r) all.set(k, [...(all.get(k) ?? []), ...v])
          runs.set(key, all)
          const m = (n: string): number => Math.round(median(r.get(n)!.map((x) => x.rps)))
          console.log(
            `  instance ${i + 1}/${instances}, ${store}: ${label} ${m(other.name)} vs plain ${m(plain.name)} req/s (median of pair ratios ${pairedRatio(r, other.name, plain.name).median.toFixed(3)})`,
          )
        }
        await gw.stop()
      }
    }
    const rows = [RESULT_HEADER]
    for (const [store] of stores) {
      for (const [id, label] of COMPARISONS) {
        const r = runs.get(`${store} ${id}`)!
        for (const name of [`${store} ${label}`, `${store} plain`])
          rows.push(resultRow(`${name} (${label} pairs)`, summarise(r.get(name)!)))
      }
    }
    console.log(
      `\n${connections} connections, ${seconds} s per run; ${instances} instances × ${pairs} adjacent pairs per comparison and store; ${bench.placement('load generator + backend + Redis')}; node ${process.version}\n`,
    )
    console.log(table(rows))
    console.log('')
    let ok = true
    for (const [store] of stores) {
      for (const [id, label, goal] of COMPARISONS) {
        const r = runs.get(`${store} ${id}`)!
        const a = `${store} ${label}`
        const b = `${store} plain`
        const ratio = totalRequests(r, a) / totalRequests(r, b)
        const p = pairedRatio(r, a, b)
        if (goal !== undefined) ok &&= ratio >= goal
        console.log(
          `${store}: ${label} / plain = ${ratio.toFixed(3)} (ratio of total requests; median of ${p.rounds.length} pair ratios ${p.median.toFixed(3)}, range ${Math.min(...p.rounds).toFixed(2)}–${Math.max(...p.rounds).toFixed(2)})${goal === undefined ? '' : `; target ≥ ${goal}: ${ratio >= goal ? 'met' : 'MISSED'}`}`,
        )
      }
    }
    if (!ok) process.exitCode = 1
  } finally {
    await bench.stop()
  }
}

await main()
