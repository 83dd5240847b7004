/**
 * How much of a tokens-per-minute budget a burst of parallel streams gets to
 * use under each `reservation` setting, side by side in one run
 * (npm run build && node --import tsx test/bench/llm-reservation.bench.ts [streams=50] [budget=3000]):
 * the real gateway, one policy per setting (each its own key and bucket of
 * `budget` tokens a minute), an upstream streaming Chat Completions whose
 * completion lengths follow one long-tailed distribution (log-normal, median
 * 40 tokens; the same sequence for every setting) and report usage, every
 * stream asking max_tokens 500 as clients do "just in case". Each key first
 * makes 16 calls (the percentile settings learn from them), then waits for
 * its bucket to refill; then `streams` calls start at once, each answered
 * after 300 ms (nothing settles before all are decided). Printed per
 * setting: the calls let through, and the tokens they used (their reported
 * usage) as a fraction of the budget: below 1 the budget was left unused,
 * above 1 it was overrun (the overrun is charged afterwards, at most a burst).
 */
import { mkdtempSync, writeFileSync } from 'node:fs'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import OpenAI from 'openai'
import { startBackend, startGateway } from '../helpers/processes.js'

const STREAMS = Number(process.argv[2] ?? 50)
const BUDGET = Number(process.argv[3] ?? 3000)
const SETTINGS = ['max_tokens', 'default', 'p50', 'p75', 'p90'] as const
const DEFAULT_MAX_COMPLETION = 100

/** A log-normal completion length (median 40, sigma 0.8) from a seeded generator: the same sequence for every setting. */
function lengths(seed: number, n: number): number[] {
  let s = seed
  const rand = (): number => {
    s = (s * 1_103_515_245 + 12_345) % 2 ** 31
    return (s + 1) / (2 ** 31 + 1)
  }
  return Array.from({ length: n }, () => {
    const z = Math.sqrt(-2 * Math.log(rand())) * Math.cos(2 * Math.PI * rand())
    return Math.max(1, Math.min(500, Math.round(Math.exp(Math.log(40) + 0.8 * z))))
  })
}

/** `/<setting>/<n>/v1/chat/completions`: the n-th completion length of the sequence, 10 tokens an event, usage at the end. */
function answer(req: IncomingMessage, res: ServerResponse, seq: number[]): void {
  const n = Number((req.url ?? '').split('/')[2])
  const completion = seq[n % seq.length]!
  const head = { id: 'chatcmpl-b', object: 'chat.completion.chunk', created: 1, model: 'm' }
  setTimeout(() => {
    res.writeHead(200, { 'content-type': 'text/event-stream' })
    for (let left = completion; left > 0; left -= 10) {
      const delta = 'tok '.repeat(Math.min(10, left))
      res.write(`data: ${JSON.stringify({ ...head, choices: [{ index: 0, delta: { content: delta }, finish_reason: null }] })}\n\n`)
    }
    res.write(`data: ${JSON.stringify({ ...head, choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] })}\n\n`)
    const usage = { prompt_tokens: 10, completion_tokens: completion, total_tokens: 10 + completion }
    res.end(`data: ${JSON.stringify({ ...head, choices: [], usage })}\n\ndata: [DONE]\n\n`)
  }, 300)
}

async function call(base: string, setting: string, n: number): Promise<number | undefined> {
  const client = new OpenAI({ apiKey: `sk-${setting}`, baseURL: `${base}/${setting}/${n}/v1`, maxRetries: 0 })
  try {
    const stream = await client.chat.completions.create({
      model: 'm',
      messages: [{ role: 'user', content: 'Summarise this in a sentence for me.' }],
      max_tokens: 500,
      stream: true,
      stream_options: { include_usage: true },
    })
    let used = 0
    for await (const chunk of stream) if (chunk.usage) used = chunk.usage.total_tokens
    return used
  } catch {
    return undefined // refused
  }
}

async function main(): Promise<void> {
  const seq = lengths(7, 256)
  const upstream = await startBackend((req, res) => {
    req.resume()
    req.on('end', () => answer(req, res, seq))
  })
  const dir = mkdtempSync(join(tmpdir(), 'fv-reservation-'))
  const bundle = join(dir, 'bundle.json')
  writeFileSync(
    bundle,
    JSON.stringify({
      bundle_version: 1,
      policies: SETTINGS.map((s) => ({
        id: s,
        spec: {
          selector: { pathPrefix: `/${s}/` },
          mode: 'enforce',
          rules: [
            {
              name: `tokens_${s}`,
              limit_keys: ['llm:api_key'],
              algorithm: 'token_bucket_llm',
              algorithm_config: { tokens_per_minute: BUDGET, default_max_completion: DEFAULT_MAX_COMPLETION, reservation: s },
            },
          ],
        },
      })),
    }),
  )
  const gw = await startGateway({ FAIRVISOR_BACKEND_URL: upstream.url, FAIRVISOR_CONFIG_FILE: bundle, FAIRVISOR_STORE: 'memory' })
  // The history: 16 calls a key, one at a time (each settles before the next is planned).
  for (const s of SETTINGS) for (let i = 0; i < 16; i++) await call(gw.url, s, 1000 + i)
  // Every bucket full again (it refills BUDGET a minute).
  await new Promise((r) => setTimeout(r, 62_000))
  const rows = await Promise.all(
    SETTINGS.map(async (s) => {
      const results = await Promise.all(Array.from({ length: STREAMS }, (_, i) => call(gw.url, s, i)))
      const passed = results.filter((r) => r !== undefined)
      const used = passed.reduce((a, b) => a + b, 0)
      return { s, passed: passed.length, used }
    }),
  )
  await gw.stop()
  await upstream.close()
  const mean = seq.slice(0, STREAMS).reduce((a, b) => a + b, 0) / STREAMS
  console.log(
    `${STREAMS} parallel streams of max_tokens 500 on ${BUDGET} tokens/min; prompt 10, completions median 40, mean ${mean.toFixed(0)}; default_max_completion ${DEFAULT_MAX_COMPLETION}\n`,
  )
  console.log('reservation   let through   tokens used / budget')
  for (const r of rows) console.log(`${r.s.padEnd(13)} ${String(r.passed).padStart(6)}        ${(r.used / BUDGET).toFixed(2)}×`)
}

await main()
