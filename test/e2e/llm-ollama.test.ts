/**
 * Ollama's native API through the real gateway with the shipped policies/llm-ollama.json
 * (keyed on the client address: Ollama has no API keys), with plain fetch (the `ollama`
 * client is not a dependency here) against an upstream answering in the shapes of its API
 * reference (test/helpers/ollama-upstream.ts): NDJSON streams and JSON answers of
 * `/api/chat` and `/api/generate`, and `/api/embed`, settle at prompt_eval_count +
 * eval_count; a stream past the cap ends with a `"done": true, "done_reason": "length"` line
 * in the shape of its endpoint, every line still JSON; a spent client gets 429 with Ollama's
 * error body. All calls come from 127.0.0.1, one bucket: the spending test runs last.
 */
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { tokenCounter } from '../../src/llm/estimate.js'
import { settled } from '../helpers/llm-settle.js'
import { PROMPT_EVAL, pieceText, startOllamaUpstream } from '../helpers/ollama-upstream.js'
import { startGateway, type Backend, type GatewayProcess } from '../helpers/processes.js'

const o200k = tokenCounter('o200k_base')
let up: Backend
let gw: GatewayProcess

interface Line {
  done: boolean
  done_reason?: string
  message?: { content: string }
  response?: string
  prompt_eval_count?: number
  eval_count?: number
  model: string
}

function call(path: string, body: object, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${gw.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  })
}

async function lines(r: Response): Promise<Line[]> {
  assert.equal(r.status, 200)
  assert.equal(r.headers.get('content-type'), 'application/x-ndjson')
  const text = await r.text()
  assert.ok(text.endsWith('\n'))
  return text
    .trimEnd()
    .split('\n')
    .map((l) => JSON.parse(l) as Line)
}

const CHAT = { model: 'llama3.2', messages: [{ role: 'user', content: 'Why is the sky blue?' }] }

describe('Ollama (policies/llm-ollama.json)', { timeout: 180_000 }, () => {
  before(async () => {
    up = await startOllamaUpstream()
    gw = await startGateway({ FAIRVISOR_BACKEND_URL: up.url, FAIRVISOR_CONFIG_FILE: 'policies/llm-ollama.json', FAIRVISOR_STORE: 'memory' })
  })

  after(async () => {
    const code = await gw?.stop()
    await up?.close()
    assert.equal(code, 0)
  })

  test('/api/chat streamed (NDJSON) and /api/generate as one JSON settle at prompt_eval_count + eval_count', async () => {
    const chat = await settled(gw, 'ollama', async () => lines(await call('/api/chat', CHAT, { 'x-chunks': '7', 'x-usage-out': '77' })))
    assert.equal(chat.result.map((l) => l.message?.content ?? '').join(''), Array.from({ length: 7 }, (_, i) => pieceText(i, 40)).join(''))
    assert.equal(chat.result.at(-1)!.done_reason, 'stop')
    assert.equal(chat.used, PROMPT_EVAL + 77)
    const gen = await settled(gw, 'ollama', async () =>
      (await call('/api/generate', { model: 'llama3.2', prompt: 'Why is the sky blue?', stream: false }, { 'x-usage-out': '123' })).json(),
    )
    assert.equal((gen.result as Line).done, true)
    assert.equal(gen.used, PROMPT_EVAL + 123)
    const embed = await settled(gw, 'ollama', async () =>
      (await call('/api/embed', { model: 'all-minilm', input: 'Why is the sky blue?' })).json(),
    )
    assert.equal(embed.used, 8, 'prompt_eval_count, no completion')
  })

  test('a stream past 4096 counted tokens ends with a done_reason "length" line of its endpoint; it settles on what was streamed', async () => {
    // 60 chunks of 400 characters: about 92 o200k tokens each, 5,500 in all.
    const script = { 'x-chunks': '60', 'x-chunk-chars': '400' }
    for (const [path, body] of [
      ['/api/chat', { ...CHAT, options: { num_predict: 100000 } }],
      ['/api/generate', { model: 'llama3.2', prompt: 'Why is the sky blue?' }],
    ] as const) {
      const r = await settled(gw, 'ollama', async () => lines(await call(path, body, script)))
      const last = r.result.at(-1)!
      assert.deepEqual(
        { done: last.done, done_reason: last.done_reason, model: last.model },
        { done: true, done_reason: 'length', model: 'llama3.2' },
        path,
      )
      assert.ok(path === '/api/chat' ? last.message?.content === '' : last.response === '', `${path}: shaped as its chunks`)
      const counted = last.eval_count!
      // Counted with the rule's tokenizer (o200k_base), chunk by chunk, as streamed.
      const streamed = r.result.slice(0, -1).map((_, i) => o200k(pieceText(i, 400)))
      assert.equal(
        counted,
        streamed.reduce((a, b) => a + b, 0),
      )
      assert.ok(counted > 4096 && counted <= 4096 + 100 + Math.max(...streamed), `${path}: cut within one buffer past 4096 (${counted})`)
      assert.equal(r.used, last.prompt_eval_count! + counted, `${path}: the prompt estimate and what was streamed`)
    }
  })

  test('spent, the client gets 429 with an Ollama error body, before the upstream', async () => {
    await settled(gw, 'ollama', async () => (await call('/api/chat', { ...CHAT, stream: false }, { 'x-usage-out': '30000' })).json())
    const before = up.count
    const r = await call('/api/generate', { model: 'llama3.2', prompt: 'Hi' })
    assert.equal(r.status, 429)
    assert.match(((await r.json()) as { error: string }).error, /tokens per minute/)
    assert.equal(up.count, before)
  })
})
