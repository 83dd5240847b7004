/**
 * LLM rules, side by side in one run (npm run build && node --import tsx test/bench/llm.bench.ts [seconds=2] [pairs=5]):
 * 1. decisions/s of the engine (memory store) on a 4 KB chat body: a
 *    token_bucket_llm rule (simple_word and tokenizer) against a plain
 *    token_bucket rule on the same request;
 * 2. prompt estimation cost per request, tokenizer vs simple_word, and each
 *    one's accuracy against the tokenizer's exact count of the prompt text
 *    (mean |estimate − exact| / exact over varied prompts);
 * 3. requests/s through the real gateway process (in-process store) of the
 *    4 KB chat POST under an LLM rule (tokenizer; body held, response usage
 *    read and settled) against a token_bucket rule, in adjacent pairs with
 *    the order flipped each pair, against a backend answering a JSON
 *    completion with `usage`. Gateway on CPU 0, wrk and backend on CPU 1.
 */
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { abPairs, pinCpus, runLoad, spawnServer, startGatewayProcess, stopAll, summarise, tempDir, type LoadResult } from './lib.js'
import { performance } from 'node:perf_hooks'
import { loadBundleBytes } from '../../src/bundle/load.js'
import { Engine } from '../../src/engine/evaluate.js'
import { estimatePrompt, tokenCounter } from '../../src/llm/estimate.js'
import { promptParts } from '../../src/llm/prompt-parts.js'
import { parseLlmBody } from '../../src/llm/request-body.js'
import { RequestView } from '../../src/request/view.js'
import { MemoryStore } from '../../src/store/memory/store.js'

const WORDS = [
  'the',
  'rate',
  'limiter',
  'gateway',
  'tokens',
  'résumé',
  'naïve',
  '東京',
  'function()',
  '{"a":1}',
  'https://example.com/x',
  '42',
  'Hello,',
  'world!',
  'streaming',
  'completion',
]
function text(chars: number, seed: number): string {
  let s = ''
  let x = seed
  while (s.length < chars) {
    x = (x * 1103515245 + 12345) % 2147483648
    s += `${WORDS[x % WORDS.length]} `
  }
  return s.slice(0, chars)
}
const chat = (content: string): Buffer =>
  Buffer.from(
    JSON.stringify({
      model: 'm',
      max_tokens: 256,
      messages: [
        { role: 'system', content: 'You are terse.' },
        { role: 'user', content },
      ],
    }),
  )
const BODY = chat(text(4000, 7)) // ≈ 4 KB

function engineRate(config: object, algorithm: string, seconds = 2): number {
  const doc = {
    bundle_version: 1,
    policies: [
      {
        id: 'p',
        spec: { selector: { pathPrefix: '/' }, rules: [{ name: 'r', limit_keys: ['header:x-k'], algorithm, algorithm_config: config }] },
      },
    ],
  }
  const r = loadBundleBytes(Buffer.from(JSON.stringify(doc)), 'bench.json', Date.now())
  if (!r.ok) throw new Error(r.errors.join('; '))
  const engine = new Engine({
    store: new MemoryStore({ maxBytes: 64 << 20 }),
    failPolicy: 'open',
    observer: { descriptorMissing() {}, shadowReject() {}, storeError() {} },
  })
  const raw = ['x-k', 'k', 'content-length', String(BODY.length), 'content-type', 'application/json']
  let n = 0
  let now = Date.now()
  const t0 = performance.now()
  while (performance.now() - t0 < seconds * 1000) {
    for (let i = 0; i < 200; i++) {
      now += 1000 // a second apart: the bucket never runs dry, every decision is a full allow
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

function estimationCost(estimator: 'simple_word' | 'tokenizer', bodies: Buffer[], rounds: number): number {
  const t0 = performance.now()
  for (let k = 0; k < rounds; k++) for (const b of bodies) estimatePrompt(estimator, 'o200k_base', parseLlmBody(b, b.length), undefined)
  return ((performance.now() - t0) * 1000) / (rounds * bodies.length)
}

tokenCounter('o200k_base')
const rows: [string, string][] = []
const tb = engineRate({ tokens_per_second: 1000, burst: 1000 }, 'token_bucket')
const sw = engineRate({ tokens_per_minute: 1e9, token_source: { estimator: 'simple_word' } }, 'token_bucket_llm')
const tk = engineRate({ tokens_per_minute: 1e9, token_source: { estimator: 'tokenizer' } }, 'token_bucket_llm')
rows.push(['token_bucket rule, 4 KB chat body', `${Math.round(tb)} decisions/s`])
rows.push(['token_bucket_llm, simple_word', `${Math.round(sw)} decisions/s`])
rows.push(['token_bucket_llm, tokenizer (o200k_base)', `${Math.round(tk)} decisions/s`])

const prompts = Array.from({ length: 40 }, (_, i) => chat(text(200 + i * 200, i + 1)))
const exact = prompts.map((b) => {
  const count = tokenCounter('o200k_base')
  const { texts, messages } = promptParts(JSON.parse(b.toString()) as Record<string, unknown>)
  return texts.reduce((n, t) => n + count(t), 0) + messages * 3 + 3
})
for (const est of ['simple_word', 'tokenizer'] as const) {
  estimationCost(est, prompts, 3) // warm-up
  const us = estimationCost(est, prompts, 20)
  let err = 0
  for (const [i, b] of prompts.entries())
    err += Math.abs(estimatePrompt(est, 'o200k_base', parseLlmBody(b, b.length), undefined) - exact[i]!) / exact[i]!
  rows.push([
    `estimate ${est} (prompts of 0.2–8 KB)`,
    `${us.toFixed(1)} µs/request, mean error ${((err / prompts.length) * 100).toFixed(1)} % vs exact`,
  ])
}
for (const [k, v] of rows) console.log(`${k.padEnd(44)} ${v}`)

// 3. Through the gateway.
const [seconds = 2, pairs = 5] = process.argv.slice(2).map(Number)
const pin = pinCpus()
const dir = tempDir('fv-bench-llm-')
const file = join(dir, 'bundle.json')
const policy = (id: string, rule: object): object => ({ id, spec: { selector: { pathPrefix: `/${id}/` }, rules: [rule] } })
writeFileSync(
  file,
  JSON.stringify({
    bundle_version: 1,
    policies: [
      policy('llm', {
        name: 'bench_llm',
        limit_keys: ['header:x-k'],
        algorithm: 'token_bucket_llm',
        algorithm_config: { tokens_per_minute: 1e12, token_source: { estimator: 'tokenizer' } },
      }),
      policy('llmsw', {
        name: 'bench_llm_sw',
        limit_keys: ['header:x-k'],
        algorithm: 'token_bucket_llm',
        algorithm_config: { tokens_per_minute: 1e12, token_source: { estimator: 'simple_word' } },
      }),
      policy('tb', {
        name: 'bench_tb',
        limit_keys: ['header:x-k'],
        algorithm: 'token_bucket',
        algorithm_config: { tokens_per_second: 1e9, burst: 1e9 },
      }),
    ],
  }),
)
const answer = JSON.stringify({
  id: 'c',
  object: 'chat.completion',
  choices: [{ message: { role: 'assistant', content: 'ok' } }],
  usage: { prompt_tokens: 900, completion_tokens: 40, total_tokens: 940 },
})
const backend = await spawnServer('backend', process.execPath, [
  '-e',
  `const b = Buffer.from(${JSON.stringify(answer)});
require('http').createServer((q, s) => { q.resume(); q.on('end', () => { s.writeHead(200, { 'content-type': 'application/json', 'content-length': b.length }); s.end(b) }) })
  .listen(0, '127.0.0.1', function () { console.log('PORT ' + this.address().port) })`,
])
try {
  const gw = await startGatewayProcess({ FAIRVISOR_BACKEND_URL: backend.url, FAIRVISOR_CONFIG_FILE: file }, [], pin?.gateway)
  const target = (name: string, path: string) => ({ name, path })
  const load = (t: { name: string; path: string }): Promise<LoadResult> =>
    runLoad({
      url: gw.url + t.path,
      connections: 32,
      seconds,
      method: 'POST',
      headers: { 'x-k': 'bench', 'content-type': 'application/json' },
      body: BODY.toString(),
    })
  const tbt = target('token_bucket rule', '/tb/v1/chat/completions')
  for (const llm of [
    target('LLM rule (tokenizer)', '/llm/v1/chat/completions'),
    target('LLM rule (simple_word)', '/llmsw/v1/chat/completions'),
  ]) {
    for (const t of [llm, tbt]) await load(t) // warm-up
    const runs = await abPairs(llm, tbt, pairs, load)
    const total = (n: string): number => runs.get(n)!.reduce((a, r) => a + r.requests, 0)
    for (const t of [llm, tbt]) {
      const x = summarise(runs.get(t.name)!)
      if (x.non2xx || x.errors) throw new Error(`${t.name}: ${x.non2xx} non-2xx, ${x.errors} errors`)
      console.log(`${`HTTP, 4 KB POST, ${t.name}`.padEnd(44)} ${Math.round(x.rps)} req/s (median), p99 ${x.p99Ms.toFixed(2)} ms`)
    }
    console.log(
      `${`HTTP: ${llm.name} / token_bucket rule`.padEnd(44)} ${(total(llm.name) / total(tbt.name)).toFixed(3)} (ratio of total requests over ${pairs} adjacent pairs of ${seconds} s; ${runs.get(llm.name)![0]!.tool}, 32 connections${pin ? `, gateway on CPU ${pin.gateway}` : ''})`,
    )
  }
} finally {
  await stopAll()
}
