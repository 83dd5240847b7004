/**
 * What counting rejected keys for the admin API's top (FAIRVISOR_ADMIN_TOKEN set) costs a rejected
 * request, in this process: the real engine on a memory store deciding requests that are all rejected,
 * with the reject hook feeding the sketch and without it, measured side by side (rounds interleaved,
 * the median ratio of their times reported), for
 *
 *   - one hot key rejected over and over (a client over its limit: one Map look-up and a sift);
 *   - every request a new key (a flood of random keys: each takes over the least counted counter);
 *   - every request a new API key (the same, and the key is a credential: hashed only when shown).
 *
 *   node --import tsx test/bench/admin-top.bench.ts [requests per round=200000] [rounds=7]
 */
import type { EngineObserver } from '../../src/engine/decision.js'
import { recordRejects, rejectedKeys } from '../../src/admin/top.js'
import { bundle, compile, Harness, policy, rule, tb, T0, view } from '../helpers/engine-harness.js'
import { table } from './lib.js'

const N = Number(process.argv[2] ?? 200_000)
const ROUNDS = Number(process.argv[3] ?? 7)

const compiled = compile(
  // A cost above the burst: every request is rejected, its first one too, and nothing is written (only the reject path runs).
  bundle([
    policy('api', [
      rule('per_user', ['header:x-user'], tb(0.000001, 1, { fixed_cost: 2 })),
      rule('per_key', ['header:x-api-key'], tb(0.000001, 1, { fixed_cost: 2 })),
    ]),
  ]),
)

interface Case {
  name: string
  headers: (i: number) => Record<string, string>
}
const cases: Case[] = [
  { name: 'one hot key', headers: () => ({ 'x-user': 'alice' }) },
  { name: 'every request a new key', headers: (i) => ({ 'x-user': `user-${i}` }) },
  { name: 'every request a new API key', headers: (i) => ({ 'x-api-key': `sk-${i}` }) },
]

/** ns per rejected request of `n` requests through `h` (views built beforehand: only the decision is timed). */
function run(h: Harness, c: Case, n: number, offset: number): number {
  const views = Array.from({ length: n }, (_, i) => view({ headers: c.headers(offset + i) }))
  let rejected = 0
  const t0 = process.hrtime.bigint()
  for (let i = 0; i < n; i++)
    h.engine.evaluate(compiled, views[i]!, T0 + 1000, false, (d) => {
      if (!d.allowed) rejected++
    })
  const ns = Number(process.hrtime.bigint() - t0) / n
  if (rejected !== n) throw new Error(`${c.name}: only ${rejected} of ${n} rejected`)
  return ns
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

const rows = [['case', 'off ns/req', 'on ns/req', 'on / off (median of rounds)']]
for (const c of cases) {
  const off = new Harness(compiled)
  const on = new Harness(compiled)
  ;(on.obs as EngineObserver).rejected = recordRejects(
    rejectedKeys({ adminToken: 'x'.repeat(16), adminTopKeys: 1000, adminTopWindowS: 300 }, T0)!,
  )
  // Warm-up: let the JIT settle on both.
  const warm = Math.min(N, 50_000)
  for (const h of [off, on]) run(h, { ...c, name: `${c.name} (warm-up)` }, warm, 0)
  const offs: number[] = []
  const ons: number[] = []
  const ratios: number[] = []
  for (let r = 0; r < ROUNDS; r++) {
    // New keys must be new in both: each round takes the next range; a hot key is the same one throughout.
    const at = warm + r * N
    const pair = r % 2 === 0 ? [off, on] : [on, off]
    const ns = pair.map((h) => run(h, c, N, at))
    const [o, n] = r % 2 === 0 ? ns : [ns[1]!, ns[0]!]
    offs.push(o!)
    ons.push(n!)
    ratios.push(n! / o!)
  }
  rows.push([c.name, median(offs).toFixed(0), median(ons).toFixed(0), median(ratios).toFixed(3)])
}
console.log(table(rows))
