/**
 * Stream metering per framing, side by side in one run
 * (node --import tsx test/bench/stream-framings.bench.ts [rounds=7]): the same completion
 * (400 chunks of 40 characters) as an OpenAI Chat Completions SSE stream, a Gemini SSE
 * stream, a Gemini JSON array, an Ollama NDJSON stream and a Bedrock event stream, fed to
 * the meter (src/llm/sse-meter.ts with its framing) in 1,400-byte reads; µs per stream and
 * MB/s, each as a ratio of the OpenAI SSE figure (rounds alternate the order; medians). Also
 * the cost per call of telling a provider path (providerOfPath) on an OpenAI path, the
 * lookup every `llm:api_key` now makes first.
 */
import { performance } from 'node:perf_hooks'
import { eventMessage, EventStreamFraming } from '../../src/llm/framings/eventstream.js'
import type { Framing } from '../../src/llm/framings/framing.js'
import { JsonArrayFraming } from '../../src/llm/framings/json-array.js'
import { NdjsonFraming } from '../../src/llm/framings/ndjson.js'
import { providerOfPath } from '../../src/llm/providers/paths.js'
import { SseMeter } from '../../src/llm/sse-meter.js'

const N = 400
const piece = (i: number): string => `${i} lorem ipsum dolor sit amet consectetur`.slice(0, 40)
const gem = (i: number): object => ({
  candidates: [{ content: { parts: [{ text: piece(i) }], role: 'model' }, index: 0 }],
  usageMetadata: { promptTokenCount: 8, candidatesTokenCount: i, totalTokenCount: 8 + i },
  modelVersion: 'gemini-2.5-flash',
  responseId: 'r',
})
const streams: { name: string; path: string; body: Buffer; framing: () => Framing | undefined }[] = [
  {
    name: 'OpenAI SSE',
    path: '/v1/chat/completions',
    body: Buffer.from(
      Array.from(
        { length: N },
        (_, i) =>
          `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: { content: piece(i) }, finish_reason: null }] })}\n\n`,
      ).join(''),
    ),
    framing: () => undefined,
  },
  {
    name: 'Gemini SSE',
    path: '/v1beta/models/m:streamGenerateContent',
    body: Buffer.from(Array.from({ length: N }, (_, i) => `data: ${JSON.stringify(gem(i))}\r\n\r\n`).join('')),
    framing: () => undefined,
  },
  {
    name: 'Gemini JSON array',
    path: '/v1beta/models/m:streamGenerateContent',
    body: Buffer.from(`[${Array.from({ length: N }, (_, i) => JSON.stringify(gem(i), null, 2)).join('\n,\r\n')}\n]`),
    framing: () => new JsonArrayFraming(),
  },
  {
    name: 'Ollama NDJSON',
    path: '/api/chat',
    body: Buffer.from(
      Array.from(
        { length: N },
        (_, i) =>
          `${JSON.stringify({ model: 'llama3.2', created_at: '2026-01-01T00:00:00Z', message: { role: 'assistant', content: piece(i) }, done: false })}\n`,
      ).join(''),
    ),
    framing: () => new NdjsonFraming(),
  },
  {
    name: 'Bedrock event stream',
    path: '/model/m/converse-stream',
    body: Buffer.concat(
      Array.from({ length: N }, (_, i) =>
        eventMessage('contentBlockDelta', { contentBlockIndex: 0, delta: { text: piece(i) }, p: 'abcdefghijklmnop' }),
      ),
    ),
    framing: () => new EventStreamFraming(),
  },
]

const limit = { maxCompletion: 1e9, bufferTokens: 100, enforce: true, wouldTruncate: (): void => undefined }

function meterOnce(s: (typeof streams)[number]): number {
  const m = new SseMeter([limit], s.path, undefined, s.framing())
  const t = performance.now()
  for (let i = 0; i < s.body.length; i += 1400) m.feed(s.body.subarray(i, i + 1400))
  const dt = performance.now() - t
  if (m.counted !== N * 10) throw new Error(`${s.name}: counted ${m.counted}`)
  return dt
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
const rounds = Number(process.argv[2] ?? 7)
for (const s of streams) for (let i = 0; i < 20; i++) meterOnce(s) // warm-up
const times = new Map(streams.map((s) => [s.name, [] as number[]]))
for (let r = 0; r < rounds; r++) {
  const order = r % 2 === 0 ? streams : [...streams].reverse()
  for (const s of order) {
    let total = 0
    for (let i = 0; i < 50; i++) total += meterOnce(s)
    times.get(s.name)!.push(total / 50)
  }
}
const base = median(times.get('OpenAI SSE')!)
console.log(`stream of ${N} chunks × 40 characters, 1,400-byte reads; medians of ${rounds} rounds of 50`)
for (const s of streams) {
  const ms = median(times.get(s.name)!)
  console.log(
    `${s.name.padEnd(22)} ${(ms * 1000).toFixed(0).padStart(6)} µs/stream  ${(s.body.length / 1024).toFixed(0).padStart(4)} KiB  ${(s.body.length / 1e6 / (ms / 1000)).toFixed(0).padStart(5)} MB/s  ×${(ms / base).toFixed(2)} the OpenAI SSE time`,
  )
}
const paths = ['/v1/chat/completions', '/v1/responses', '/v1/messages']
let sink = 0
const t = performance.now()
const calls = 3_000_000
for (let i = 0; i < calls; i++) sink += providerOfPath(paths[i % 3]!) === undefined ? 1 : 0
console.log(
  `providerOfPath on OpenAI/Anthropic paths: ${(((performance.now() - t) * 1e6) / calls).toFixed(0)} ns per call (${sink === calls ? 'none matched' : 'MATCHED'})`,
)
