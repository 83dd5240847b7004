/**
 * Cost of a concurrency rule against a token_bucket rule (and no rule), in
 * three parts, every comparison side by side in one run:
 *
 * 1. The decision in this process, on the in-process (memory) store, with
 *    the build's modules (dist/) as the gateway runs them: CPU
 *    time per decision of the engine (a RequestView built, the rules
 *    planned, the store's one call, the headers) for a concurrency rule with
 *    its give-back made as the gateway makes it when the exchange ends (a
 *    direct decrement of the counter, Store.adjustNow), against a
 *    token_bucket rule and a path no policy selects; `engineMs` rounds,
 *    interleaved, medians. CPU time, not wall time: another process's load
 *    stretches the wall clock, not the CPU a decision takes. Target:
 *    concurrency / token bucket ≥ 0.9.
 * 2. The decision service (POST /v1/decision, allowed), as
 *    sliding-window.bench.ts measures a kind's decision: decisions/s of a
 *    concurrency rule with `"release": "lease"` (the decision service sees
 *    no request end: a slot is held for its lease, 1 s here, so they never
 *    run out) against the token bucket, with the in-process store and with
 *    Redis. Target: ≥ 0.9 on both.
 * 3. The proxied allow path: requests/s of the concurrency rule
 *    (max_concurrent far above the connections: it never rejects; each
 *    request takes its slot in the decision's store call and gives it back
 *    when its response ends, on Redis with the turn's other give-backs in
 *    one script call), of the token bucket and of a path no policy selects,
 *    in process and on Redis. Target: concurrency / no rule ≥ 0.9 in
 *    process (on Redis a rule's round trips are the store's price, shown
 *    beside it), and against the token bucket on both.
 *
 *   npm run build && flock /tmp/fv-heavy.lock node --import tsx test/bench/concurrency.bench.ts [--no-pin] [seconds=2] [rounds=6] [instances=1] [connections=64] [engineMs=300]
 *
 * FV_BENCH_PARTS=engine,decision,proxy picks parts (default all). The
 * token bucket never fills up again (burst 1e9, 1 token/s): a full one is
 * forgotten at once (lossless), and every decision would then pay for a new
 * counter rather than for the bucket's maths. Its numbers stay below 2^30:
 * V8 keeps small integers in an object's fields as they are, but once one
 * object of a shape holds a larger number (1e12) every object of that shape
 * boxes its numbers, and the headers' objects of every rule in the process
 * then cost allocations (a quarter more per decision, measured). Per store and part,
 * `instances` fresh gateways, each warmed up on every path, then `rounds`
 * rounds of the paths, the order rotating every round; verdicts are ratios
 * of total requests, the median of per-round ratios beside them. Gateway
 * pinned to CPU 0, everything else on the other CPUs.
 */
import { existsSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import type { Decision } from '../../src/engine/decision.js'
import { interleave, median, pairedRatio, runLoad, summarise, table, tempDir, type LoadResult, type Running } from './lib.js'
import { benchArgs, RESULT_HEADER, resultRow, startStoreBench, totalRequests, type StoreBench } from './store-bench.js'

const { noPin, nums } = benchArgs()
const [seconds = 2, rounds = 6, instances = 1, connections = 64, engineMs = 300] = nums
const PARTS = new Set((process.env.FV_BENCH_PARTS ?? 'engine,decision,proxy').split(','))
const USER = 'bench'

const policy = (id: string, rule: object): object => ({ id, spec: { selector: { pathPrefix: `/${id}/` }, rules: [rule] } })
const rule = (name: string, algorithm: string, config: object): object => ({
  name,
  limit_keys: ['header:x-user'],
  algorithm,
  algorithm_config: config,
})
const BUCKET = policy('bucket', rule('bench_bucket', 'token_bucket', { burst: 1e9, tokens_per_second: 1 }))
/** Reverse proxy: slots given back when each exchange ends. */
const PROXY_POLICIES = [policy('slots', rule('bench_slots', 'concurrency', { max_concurrent: 1_000_000 })), BUCKET]
/** Decision service: slots held for their lease (1 s), so 1,000,000 never run out. */
const DECISION_POLICIES = [
  policy('slots', rule('bench_slots', 'concurrency', { max_concurrent: 1_000_000, lease_seconds: 1, release: 'lease' })),
  BUCKET,
]

function bundleFile(dir: string, name: string, policies: object[]): string {
  const file = join(dir, `${name}.json`)
  writeFileSync(file, JSON.stringify({ bundle_version: 1, policies }))
  return file
}

/**
 * The engine's modules from the build (dist/, `npm run build`), as the gateway runs them; from src/ only
 * without one. src/ runs through tsx's transform, which reads every imported binding through a getter
 * (the kinds' EPSILON, the stores' CELLS): a cost the build does not have, larger for a kind whose maths
 * read them more often.
 */
async function engineModules() {
  const dist = new URL('../../dist/', import.meta.url)
  const base = existsSync(new URL('engine/evaluate.js', dist)) ? dist.href : new URL('../../src/', import.meta.url).href
  const from = <T>(path: string): Promise<T> => import(`${base}${path}`) as Promise<T>
  return {
    base,
    ...(await from<typeof import('../../src/bundle/load.js')>('bundle/load.js')),
    ...(await from<typeof import('../../src/engine/evaluate.js')>('engine/evaluate.js')),
    ...(await from<typeof import('../../src/request/target.js')>('request/target.js')),
    ...(await from<typeof import('../../src/request/view.js')>('request/view.js')),
    ...(await from<typeof import('../../src/store/memory/store.js')>('store/memory/store.js')),
  }
}

/** Part 1: CPU µs per decision of the engine on the memory store, per side; the concurrency side gives each slot back. */
async function engineDecisions(): Promise<boolean> {
  const { base, loadBundleBytes, Engine, MemoryStore, readTarget, RequestView } = await engineModules()
  const loaded = loadBundleBytes(Buffer.from(JSON.stringify({ bundle_version: 1, policies: PROXY_POLICIES })), 'bench', Date.now())
  if (!loaded.ok) throw new Error(loaded.errors.join('; '))
  const store = new MemoryStore({ maxBytes: 64 << 20 })
  const noop = (): void => undefined
  const engine = new Engine({ store, failPolicy: 'open', observer: { descriptorMissing: noop, shadowReject: noop, storeError: noop } })
  const decide = (path: string): Decision => {
    const t = readTarget(path, 'bench', 'reject')
    const input = {
      method: 'GET',
      path: t.path,
      alsoPaths: t.alsoPaths,
      rawQuery: '',
      host: 'bench',
      rawHeaders: ['x-user', USER],
      peer: '127.0.0.1',
    }
    let d: Decision | undefined
    engine.evaluate(loaded.bundle, new RequestView(input, undefined), Date.now(), false, (x) => (d = x))
    if (d === undefined || !d.allowed) throw new Error(`${path}: not allowed at once`)
    return d
  }
  const sides: [string, () => void][] = [
    [
      'concurrency',
      () => {
        // As http/slot-holds.ts gives a slot back on an in-process store when the exchange ends.
        const held = decide('/slots/x').held!
        for (let i = 0; i < held.length; i++) store.adjustNow(held[i]!, held[i]!.at)
      },
    ],
    ['token bucket', () => void decide('/bucket/x')],
    ['no rule', () => void decide('/none/x')],
  ]
  const costs = new Map<string, number[]>(sides.map(([n]) => [n, []]))
  const engineRounds = Math.max(8, rounds * 2)
  for (let round = -1; round < engineRounds; round++) {
    for (let k = 0; k < sides.length; k++) {
      const [name, one] = sides[(k + Math.max(0, round)) % sides.length]!
      let n = 0
      const end = performance.now() + engineMs
      const cpu = process.cpuUsage()
      while (performance.now() < end) for (let i = 0; i < 256; i++, n++) one()
      const used = process.cpuUsage(cpu)
      if (round >= 0) costs.get(name)!.push((used.user + used.system) / n) // round -1 warms up
    }
  }
  const med = (n: string): number => median(costs.get(n)!)
  const built = base.endsWith('/dist/') ? 'the build (dist/)' : 'src/ through tsx (no build)'
  console.log(`1. engine on ${built}, memory store, ${engineRounds} rounds of ${engineMs} ms per side, medians of CPU time per decision:`)
  for (const [n] of sides) console.log(`  ${n.padEnd(13)} ${med(n).toFixed(3)} µs (${Math.round(1e6 / med(n))} decisions per CPU second)`)
  const ratio = med('token bucket') / med('concurrency')
  console.log(
    `  concurrency with its give-back / token bucket (decisions per CPU second) = ${ratio.toFixed(3)}; target ≥ 0.9: ${ratio >= 0.9 ? 'met' : 'MISSED'}`,
  )
  console.log(`  concurrency with its give-back / no rule = ${(med('no rule') / med('concurrency')).toFixed(3)}\n`)
  return ratio >= 0.9
}

interface Target {
  name: string
  path: string
  gw: Running
}

/** Runs `sides` (name, path) on `instances` fresh gateways per store, rounds interleaved; the runs by `<store> <side>`. */
async function measure(
  bench: StoreBench,
  sides: readonly (readonly [string, string])[],
  load: (t: Target) => Promise<LoadResult>,
  env: Record<string, string>,
): Promise<Map<string, LoadResult[]>> {
  const runs = new Map<string, LoadResult[]>()
  for (let i = 0; i < instances; i++) {
    for (const [store, url] of [
      ['memory', 'memory'],
      ['redis', bench.redis.url],
    ] as const) {
      const gw = await bench.gateway(url, env)
      const targets: Target[] = sides.map(([side, path]) => ({ name: `${store} ${side}`, path, gw }))
      // Warm up (JIT, connection pools, script cache); the first side rotates per instance.
      for (let k = 0; k < targets.length; k++) await load(targets[(k + i) % targets.length]!)
      const r = await interleave(targets, rounds, (t) => load(t))
      for (const [k, v] of r) runs.set(k, [...(runs.get(k) ?? []), ...v])
      const m = (n: string): number => Math.round(median(r.get(n)!.map((x) => x.rps)))
      console.log(
        `  instance ${i + 1}/${instances}, ${store}: ${targets.map((t) => `${t.name.slice(store.length + 1)} ${m(t.name)}`).join(', ')} req/s`,
      )
      await gw.stop()
    }
  }
  return runs
}

/** The table of `sides` and the verdict of `a` against each `[b, target]`; whether every target was met. */
function report(
  runs: Map<string, LoadResult[]>,
  sides: readonly (readonly [string, string])[],
  verdicts: [string, string, boolean][],
): boolean {
  const rows = [RESULT_HEADER]
  for (const store of ['memory', 'redis'])
    for (const [side] of sides) rows.push(resultRow(`${store} ${side}`, summarise(runs.get(`${store} ${side}`)!)))
  console.log(table(rows))
  let ok = true
  for (const [a, b, target] of verdicts) {
    const ratio = totalRequests(runs, a) / totalRequests(runs, b)
    const p = pairedRatio(runs, a, b)
    if (target) ok &&= ratio >= 0.9
    console.log(
      `${a} / ${b} = ${ratio.toFixed(3)} (ratio of total requests; median of ${p.rounds.length} round ratios ${p.median.toFixed(3)}, range ${Math.min(...p.rounds).toFixed(2)}–${Math.max(...p.rounds).toFixed(2)})${target ? `; target ≥ 0.9: ${ratio >= 0.9 ? 'met' : 'MISSED'}` : ''}`,
    )
  }
  console.log('')
  return ok
}

async function main(): Promise<void> {
  let ok = true
  if (PARTS.has('engine')) ok = await engineDecisions()
  if (!PARTS.has('decision') && !PARTS.has('proxy')) return void (process.exitCode = ok ? 0 : 1)
  const dir = tempDir('fv-bench-concurrency-')
  const bench = await startStoreBench({ bundleFile: bundleFile(dir, 'proxy', PROXY_POLICIES), pin: !noPin })
  const placement = bench.placement('load generator + backend + Redis')
  const headers = { 'x-user': USER }
  try {
    if (PARTS.has('decision')) {
      const sides = [
        ['concurrency (lease)', '/slots/x'],
        ['token bucket', '/bucket/x'],
      ] as const
      const env = { FAIRVISOR_MODE: 'decision_service', FAIRVISOR_CONFIG_FILE: bundleFile(dir, 'decision', DECISION_POLICIES) }
      const runs = await measure(
        bench,
        sides,
        async (t) => {
          const h = { ...headers, 'x-original-uri': t.path, 'x-original-method': 'GET' }
          const r = await runLoad({ url: `${t.gw.url}/v1/decision`, method: 'POST', connections, seconds, headers: h })
          if (r.non2xx > 0) throw new Error(`${t.name}: ${r.non2xx} non-2xx answers: the setup is wrong`)
          return r
        },
        env,
      )
      console.log(
        `\n2. decision service, ${runs.get('memory token bucket')![0]!.tool}, ${connections} connections, ${seconds} s per run; ${instances} instance(s) × ${rounds} rounds per store; ${placement}; node ${process.version}\n`,
      )
      ok =
        report(runs, sides, [
          ['memory concurrency (lease)', 'memory token bucket', true],
          ['redis concurrency (lease)', 'redis token bucket', true],
        ]) && ok
    }
    if (PARTS.has('proxy')) {
      const sides = [
        ['concurrency', '/slots/x'],
        ['token bucket', '/bucket/x'],
        ['no rule', '/none/x'],
      ] as const
      const runs = await measure(
        bench,
        sides,
        async (t) => {
          const r = await runLoad({ url: t.gw.url + t.path, connections, seconds, headers })
          // Socket errors (timeouts on a loaded machine) are counted in the table; a non-2xx answer means the setup is wrong.
          if (r.non2xx > 0) throw new Error(`${t.name}: ${r.non2xx} non-2xx answers: the setup is wrong`)
          return r
        },
        {},
      )
      console.log(
        `\n3. proxied allow path, ${runs.get('memory no rule')![0]!.tool}, ${connections} connections, ${seconds} s per run; ${instances} instance(s) × ${rounds} rounds per store; ${placement}; node ${process.version}\n`,
      )
      ok =
        report(runs, sides, [
          ['memory concurrency', 'memory no rule', true],
          ['memory concurrency', 'memory token bucket', true],
          ['memory token bucket', 'memory no rule', false],
          ['redis concurrency', 'redis token bucket', true],
          ['redis concurrency', 'redis no rule', false],
        ]) && ok
    }
  } finally {
    await bench.stop()
  }
  if (!ok) process.exitCode = 1
}

await main()
