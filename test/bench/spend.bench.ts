/**
 * Budgets in money and llm:model, side by side in one run (node --import tsx test/bench/spend.bench.ts [seconds=2] [pairs=3]):
 * 1. decisions/s of the engine (memory store) on a 4 KB chat body: a token_bucket_llm rule
 *    (simple_word), a budget in money (`"cost_key": "llm_price"`, simple_word), both together,
 *    and a token_bucket_llm rule keyed on llm:api_key and llm:model; rounds interleaved, medians
 *    and their ratios to the token_bucket_llm rule alone;
 * 2. what reading llm:model adds to the JSON parse LLM rules make anyway, per body: a body with
 *    one literal "model" key and no \u escape (no scan), and the same body written as Python's
 *    json.dumps writes non-ASCII text (\u escapes: the top-level keys are scanned for a second
 *    model).
 */
import { performance } from 'node:perf_hooks'
import { loadBundleBytes } from '../../src/bundle/load.js'
import { Engine } from '../../src/engine/evaluate.js'
import { parseLlmBody } from '../../src/llm/request-body.js'
import { llmModel } from '../../src/request/llm-model.js'
import { RequestView } from '../../src/request/view.js'
import { MemoryStore } from '../../src/store/memory/store.js'

const seconds = Number(process.argv[2] ?? 2)
const pairs = Number(process.argv[3] ?? 3)

const content = 'The gateway counts what each call costs, résumé and 東京 included. '.repeat(62) // ≈ 4 KB
const chatBody = (ascii: boolean): Buffer => {
  const doc = {
    model: 'gpt-4o-mini',
    max_tokens: 256,
    messages: [
      { role: 'system', content: 'You are terse.' },
      { role: 'user', content },
    ],
  }
  const json = JSON.stringify(doc)
  // Python's json.dumps (ensure_ascii) escapes every non-ASCII character.
  return Buffer.from(ascii ? json.replace(/[\u0080-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`) : json)
}
const BODY = chatBody(false)
const PRICES = { currency: 'USD', per_million_tokens: { 'gpt-4o*': { input: 2.5, output: 10 }, default: { input: 15, output: 60 } } }

const llmRule = (keys: string[]): object => ({
  name: `tokens_${keys.length}`,
  limit_keys: keys,
  algorithm: 'token_bucket_llm',
  algorithm_config: { tokens_per_minute: 1e12 },
})
const moneyRule = {
  name: 'usd',
  limit_keys: ['llm:api_key'],
  algorithm: 'cost_based',
  algorithm_config: { budget: 1e9, period: '1d', cost_key: 'llm_price', staged_actions: [{ threshold_percent: 100, action: 'reject' }] },
}

function engineRate(rules: object[]): number {
  const doc = { bundle_version: 1, llm_prices: PRICES, policies: [{ id: 'p', spec: { selector: { pathPrefix: '/' }, rules } }] }
  const r = loadBundleBytes(Buffer.from(JSON.stringify(doc)), 'bench.json', Date.now())
  if (!r.ok) throw new Error(r.errors.join('; '))
  const engine = new Engine({
    store: new MemoryStore({ maxBytes: 64 << 20 }),
    failPolicy: 'open',
    observer: { descriptorMissing() {}, shadowReject() {}, storeError() {} },
  })
  const raw = ['authorization', 'Bearer sk-1', 'content-length', String(BODY.length), 'content-type', 'application/json']
  let n = 0
  let now = Date.now()
  const t0 = performance.now()
  while (performance.now() - t0 < seconds * 1000) {
    for (let i = 0; i < 200; i++) {
      now += 1000
      engine.evaluate(
        r.bundle,
        new RequestView(
          { method: 'POST', path: '/v1/chat/completions', rawQuery: '', host: 'h', rawHeaders: raw, peer: '10.0.0.1', body: BODY },
          undefined,
        ),
        now,
        false,
        () => {},
      )
      n++
    }
  }
  return n / ((performance.now() - t0) / 1000)
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

const targets: [string, object[]][] = [
  ['token_bucket_llm (llm:api_key)', [llmRule(['llm:api_key'])]],
  ['budget in money (llm_price)', [moneyRule]],
  ['both rules', [llmRule(['llm:api_key']), moneyRule]],
  ['token_bucket_llm (llm:api_key, llm:model)', [llmRule(['llm:api_key', 'llm:model'])]],
]
const rates = targets.map(() => [] as number[])
for (let p = 0; p < pairs; p++) {
  // Rotate the order each round, so a noisy neighbour skews every target alike.
  for (let k = 0; k < targets.length; k++) {
    const i = (k + p) % targets.length
    rates[i]!.push(engineRate(targets[i]![1]))
  }
}
const base = median(rates[0]!)
for (const [i, [name]] of targets.entries()) {
  const m = median(rates[i]!)
  console.log(`${name.padEnd(44)} ${String(Math.round(m)).padStart(8)} decisions/s   ${(m / base).toFixed(2)} × the first`)
}

/** µs per call of `f`, the median of `batches` batches of `n`, interleaved with the other functions measured. */
function interleaved(fs: (() => void)[], batches: number, n: number): number[] {
  const times = fs.map(() => [] as number[])
  for (let b = 0; b < batches; b++)
    for (const [i, f] of fs.entries()) {
      const t0 = performance.now()
      for (let k = 0; k < n; k++) f()
      times[i]!.push(((performance.now() - t0) * 1000) / n)
    }
  return times.map(median)
}

for (const [name, body] of [
  ['one "model", no \\u escape (no scan)', BODY],
  ['\\u-escaped text (top-level keys scanned)', chatBody(true)],
] as const) {
  const view = (): RequestView =>
    new RequestView(
      {
        method: 'POST',
        path: '/v1/chat/completions',
        rawQuery: '',
        host: 'h',
        rawHeaders: ['content-length', String(body.length)],
        peer: '1',
        body,
      },
      undefined,
    )
  // The parse LLM rules make anyway, and the same plus llm:model on a fresh view.
  const fs = [() => parseLlmBody(body, body.length), () => llmModel(view())]
  interleaved(fs, 5, 500) // warm-up
  const [parse, both] = interleaved(fs, 41, 500) as [number, number]
  const model = both - parse
  console.log(
    `${`llm:model, ${name}`.padEnd(52)} ${model.toFixed(2)} µs on top of a ${parse.toFixed(2)} µs parse of ${body.length} B (${((model / parse) * 100).toFixed(0)} %)`,
  )
}
