/**
 * Cost of a concurrency rule, in two parts.
 *
 * The decision, in this process on the in-process (memory) store: CPU time
 * per decision of the engine (a RequestView built, the rules planned, the
 * store's one call, the headers) for a concurrency rule, with its give-back
 * (the store.adjust that ends its exchange; the gateway sends the give-backs
 * of one event-loop turn together, here 64 at a time), against a
 * token_bucket rule and against a path no policy selects; rounds of
 * `engineMs` each, interleaved, medians. CPU time, not wall time: on a shared
 * machine another process's load stretches the wall clock, not the CPU a
 * decision takes. Target: concurrency / token bucket ≥ 0.9.
 *
 * The proxied allow path: requests/s of one `concurrency` rule
 * (max_concurrent far above the connections, so it never rejects; each
 * request takes its slot in the decision's store call and gives it back when
 * its response ends, a second store call) against one token_bucket rule
 * (never rejects) and against no rule at all (a path no policy selects), all
 * keyed on one header value and proxied to the same backend, with the
 * in-process store and with Redis. Targets: concurrency / token bucket ≥ 0.9
 * on both stores; concurrency / no rule ≥ 0.9 on the in-process store (on
 * Redis a rule's round trips are the store's price, shown beside it).
 *
 *   npm run build && flock /tmp/fv-heavy.lock node --import tsx test/bench/concurrency.bench.ts [--no-pin] [seconds=2] [rounds=6] [instances=2] [connections=64] [engineMs=500]
 *
 * One bundle holds both rules on two path prefixes, so every comparison runs
 * on the same gateway process. Per store, `instances` fresh gateways are
 * started; each is warmed up on the three paths and then run for `rounds`
 * rounds of the three, the order rotating every round (interleave). The
 * verdicts are ratios of total requests (as in budget.bench.ts), with the
 * median of per-round ratios beside them. CPU placement as in
 * redis.bench.ts: gateway on CPU 0, everything else on the other CPUs.
 */
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { loadBundleBytes } from '../../src/bundle/load.js'
import type { Decision } from '../../src/engine/decision.js'
import { Engine } from '../../src/engine/evaluate.js'
import { readTarget } from '../../src/request/target.js'
import { RequestView } from '../../src/request/view.js'
import { MemoryStore } from '../../src/store/memory/store.js'
import type { Adjustment } from '../../src/store/store.js'
import { interleave, median, pairedRatio, runLoad, summarise, table, tempDir, type LoadResult, type Running } from './lib.js'
import { benchArgs, RESULT_HEADER, resultRow, startStoreBench, totalRequests } from './store-bench.js'

const { noPin, nums } = benchArgs()
const [seconds = 2, rounds = 6, instances = 2, connections = 64, engineMs = 500] = nums

function bundle(dir: string): string {
  const file = join(dir, 'bundle.json')
  const policy = (id: string, rule: object): object => ({ id, spec: { selector: { pathPrefix: `/${id}/` }, rules: [rule] } })
  writeFileSync(
    file,
    JSON.stringify({
      bundle_version: 1,
      policies: [
        policy('slots', {
          name: 'bench_slots',
          limit_keys: ['header:x-user'],
          algorithm: 'concurrency',
          algorithm_config: { max_concurrent: 1_000_000 },
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

const SIDES = [
  ['concurrency', '/slots/x'],
  ['token bucket', '/bucket/x'],
  ['no rule', '/none/x'],
] as const

/** CPU µs per decision of the engine on the memory store per side, `rounds` interleaved rounds of `engineMs`; the concurrency side gives each slot back. */
function engineDecisions(bundleFile: string): void {
  const loaded = loadBundleBytes(readFileSync(bundleFile), 'bench', Date.now())
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
      rawHeaders: ['x-user', 'bench'],
      peer: '127.0.0.1',
    }
    let d: Decision | undefined
    engine.evaluate(loaded.bundle, new RequestView(input, undefined), Date.now(), false, (x) => (d = x))
    if (d === undefined || !d.allowed) throw new Error(`${path}: not allowed at once`)
    return d
  }
  let back: Adjustment[] = []
  const sides: [string, () => void][] = [
    [
      'concurrency',
      () => {
        for (const h of decide('/slots/x').held!) back.push({ key: h.key, limit: h.limit, amount: h.cost, at: h.at })
        if (back.length < 64) return
        store.adjust(back, Date.now() / 1000, noop)
        back = []
      },
    ],
    ['token bucket', () => void decide('/bucket/x')],
    ['no rule', () => void decide('/none/x')],
  ]
  const costs = new Map<string, number[]>(sides.map(([n]) => [n, []]))
  for (let round = -1; round < rounds; round++) {
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
  console.log(`engine, memory store, ${rounds} rounds of ${engineMs} ms per side, medians of CPU time per decision:`)
  for (const [n] of sides) console.log(`  ${n.padEnd(13)} ${med(n).toFixed(3)} µs (${Math.round(1e6 / med(n))} decisions per CPU second)`)
  const ratio = med('token bucket') / med('concurrency')
  console.log(
    `  concurrency with its give-back / token bucket (decisions per CPU second) = ${ratio.toFixed(3)}; target ≥ 0.9: ${ratio >= 0.9 ? 'met' : 'MISSED'}`,
  )
  console.log(`  concurrency with its give-back / no rule = ${(med('no rule') / med('concurrency')).toFixed(3)}\n`)
  if (ratio < 0.9) process.exitCode = 1
}

async function main(): Promise<void> {
  const bundleFile = bundle(tempDir('fv-bench-concurrency-'))
  engineDecisions(bundleFile)
  const bench = await startStoreBench({ bundleFile, pin: !noPin })
  try {
    const stores = [
      ['memory', 'memory'],
      ['redis', bench.redis.url],
    ] as const
    const runs = new Map<string, LoadResult[]>()
    const load = async (t: Target): Promise<LoadResult> => {
      const r = await runLoad({ url: t.gw.url + t.path, connections, seconds, headers: { 'x-user': 'bench' } })
      // Socket errors (timeouts on a loaded machine) are counted in the table; a non-2xx answer means the setup is wrong.
      if (r.non2xx > 0) throw new Error(`${t.name}: ${r.non2xx} non-2xx answers: the setup is wrong`)
      return r
    }
    for (let i = 0; i < instances; i++) {
      for (const [store, url] of stores) {
        const gw = await bench.gateway(url)
        const targets: Target[] = SIDES.map(([side, path]) => ({ name: `${store} ${side}`, path, gw }))
        // Warm up (JIT, connection pools, script cache); the first side rotates per instance.
        for (let k = 0; k < targets.length; k++) {
          const t = targets[(k + i) % targets.length]!
          await load({ ...t, name: `${t.name} (warm-up)` })
        }
        const r = await interleave(targets, rounds, (t) => load(t))
        for (const [k, v] of r) runs.set(k, [...(runs.get(k) ?? []), ...v])
        const m = (n: string): number => Math.round(median(r.get(n)!.map((x) => x.rps)))
        console.log(
          `  instance ${i + 1}/${instances}, ${store}: ${targets.map((t) => `${t.name.slice(store.length + 1)} ${m(t.name)}`).join(', ')} req/s`,
        )
        await gw.stop()
      }
    }
    const rows = [RESULT_HEADER]
    for (const [store] of stores)
      for (const [side] of SIDES) rows.push(resultRow(`${store} ${side}`, summarise(runs.get(`${store} ${side}`)!)))
    const placement = bench.placement('load generator + backend + Redis')
    console.log(
      `\n${runs.get('memory concurrency')![0]!.tool}, ${connections} connections, ${seconds} s per run; ${instances} instances × ${rounds} rounds per store; ${placement}; node ${process.version}\n`,
    )
    console.log(table(rows))
    console.log('')
    const total = (n: string): number => totalRequests(runs, n)
    let ok = true
    for (const [store] of stores) {
      for (const [other, target] of [
        ['token bucket', true],
        ['no rule', store === 'memory'],
      ] as const) {
        const a = `${store} concurrency`
        const b = `${store} ${other}`
        const ratio = total(a) / total(b)
        const p = pairedRatio(runs, a, b)
        if (target) ok &&= ratio >= 0.9
        console.log(
          `${store}: concurrency / ${other} = ${ratio.toFixed(3)} (ratio of total requests; median of ${p.rounds.length} round ratios ${p.median.toFixed(3)}, range ${Math.min(...p.rounds).toFixed(2)}–${Math.max(...p.rounds).toFixed(2)})${target ? `; target ≥ 0.9: ${ratio >= 0.9 ? 'met' : 'MISSED'}` : ''}`,
        )
      }
    }
    if (!ok) process.exitCode = 1
  } finally {
    await bench.stop()
  }
}

await main()
