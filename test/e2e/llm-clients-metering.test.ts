/**
 * Metering with every common client (docs/llm.md "Counting"), through the real gateway in front
 * of an upstream answering the recorded shapes of each API, whose Chat Completions streams carry
 * their usage chunk only when asked: every client's plain and streamed call settles at exactly
 * the upstream's usage (the AI SDK's OpenAI-compatible provider, which does not ask, because the
 * gateway asks for it and keeps the extra chunk from the client; the Agents SDK's chat model,
 * which closes right after [DONE], on the usage that came before); legacy completions and audio
 * deltas are counted and cut; a Chinese reply is counted by its script (cut in time); Groq's
 * x_groq.usage is read; a rule with a tokenizer counts a stream without usage with it.
 */
import assert from 'node:assert/strict'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import OpenAI from 'openai'
import { tokenCounter } from '../../src/llm/estimate.js'
import { startApiLlm, type ApiLlm } from '../helpers/api-llm.js'
import { CLIENTS, callClient, DIALECT } from '../helpers/llm-clients.js'
import { fixture } from '../helpers/replay-llm.js'
import { metricValue, startGateway, type GatewayProcess } from '../helpers/processes.js'

/** The usage each recorded answer reports (prompt + completion, Anthropic's cache tokens as input). */
const USAGE = {
  plain: { chat: 28, messages: 12 + 100 + 2000 + 6, responses: 49 },
  stream: { chat: 200, messages: 25 + 40 + 187, responses: 220 },
}

/** A Chat Completions audio stream (modalities text + audio): each delta one second of 24 kHz 16-bit audio and 8 characters of transcript. */
function audioStream(deltas: number): string {
  const head = { id: 'chatcmpl-audio', object: 'chat.completion.chunk', created: 1, model: 'gpt-4o-audio-preview' }
  let out = ''
  for (let i = 0; i < deltas; i++) {
    const audio = { id: 'audio_1', data: 'A'.repeat(64_000), transcript: 'abcdefgh', expires_at: 2 }
    const delta = i === 0 ? { role: 'assistant', content: null, audio } : { audio }
    out += `data: ${JSON.stringify({ ...head, choices: [{ index: 0, delta, finish_reason: null }] })}\n\n`
  }
  return `${out}data: ${JSON.stringify({ ...head, choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] })}\n\ndata: [DONE]\n\n`
}

function writeBundle(dir: string): string {
  const p = (id: string, config: object): object => ({
    id,
    spec: {
      selector: { pathPrefix: `/${id}/` },
      mode: 'enforce',
      rules: [
        {
          name: id,
          limit_keys: ['llm:api_key'],
          algorithm: 'token_bucket_llm',
          algorithm_config: { tokens_per_minute: 1_000_000, ...config },
        },
      ],
    },
  })
  const cut = { max_completion_tokens: 50, streaming: { buffer_tokens: 10 } }
  const file = join(dir, 'bundle.json')
  writeFileSync(
    file,
    JSON.stringify({
      bundle_version: 1,
      policies: [
        p('free', {}),
        p('cut', cut),
        p('cjk', cut),
        p('audio', cut),
        p('groq', {}),
        p('tok', { token_source: { estimator: 'tokenizer' } }),
      ],
    }),
  )
  return file
}

let upstream: ApiLlm
let gw: GatewayProcess
let n = 0

/** Runs `call`, then waits for `policy`'s consumed-tokens counter to move (the settlement) and returns by how much. */
async function settled<T>(policy: string, call: () => Promise<T>): Promise<{ result: T; used: number }> {
  const read = async (): Promise<number> => (await metricValue(gw, 'fairvisor_tokens_consumed_total', `policy="${policy}"`)) ?? 0
  const before = await read()
  const result = await call()
  // The settlement follows the response's end within a store call (in-process here); the bound only guards a missing one.
  for (let deadline = Date.now() + 10_000; ; await new Promise((r) => setTimeout(r, 10))) {
    const now = await read()
    if (now !== before) return { result, used: now - before }
    assert.ok(Date.now() < deadline, `no settlement for ${policy}`)
  }
}

describe('metering with every client', { timeout: 180_000 }, () => {
  before(async () => {
    upstream = await startApiLlm((r) => {
      if (r.path.startsWith('/groq/')) return { fixture: 'groq-stream.sse' }
      if (r.path.startsWith('/cjk/') || r.path.startsWith('/tok/')) return { fixture: 'chat-cjk-stream.sse' }
      if (r.path.startsWith('/audio/')) return { fixture: 'chat-stream.sse', body: audioStream(6) }
      return undefined
    })
    gw = await startGateway({
      FAIRVISOR_BACKEND_URL: upstream.url,
      FAIRVISOR_CONFIG_FILE: writeBundle(mkdtempSync(join(tmpdir(), 'fv-meter-'))),
      FAIRVISOR_STORE: 'memory',
    })
  })

  after(async () => {
    const code = await gw?.stop()
    await upstream?.close()
    assert.equal(code, 0)
  })

  test("every client's plain and streamed call settles at exactly the upstream's usage", async () => {
    for (const client of CLIENTS)
      for (const stream of [false, true]) {
        const r = await settled('free', () => callClient(client, { root: `${gw.url}/free`, apiKey: `sk-${n++}`, stream, maxRetries: 0 }))
        assert.ok(r.result.text.length > 0, `${client} ${stream}: an answer`)
        assert.equal(r.used, USAGE[stream ? 'stream' : 'plain'][DIALECT[client]], `${client}, stream ${stream}`)
      }
    // The AI SDK's OpenAI-compatible provider did not ask for usage; the upstream was asked for it.
    const compatible = upstream.seen.filter((s) => s.body?.stream === true && s.headers['user-agent']?.includes('ai-sdk/openai-compatible'))
    assert.ok(compatible.length > 0)
    for (const s of compatible) assert.deepEqual(s.body?.stream_options, { include_usage: true })
  })

  test('the usage chunk the gateway asked for is kept from a client that did not ask for it', async () => {
    const ask = async (body: object): Promise<string> => {
      const r = await fetch(`${gw.url}/free/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer sk-${n++}` },
        body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }], stream: true, ...body }),
      })
      return r.text()
    }
    const text = await ask({})
    assert.doesNotMatch(text, /"choices":\[\],"usage":\{/)
    assert.match(text, /data: \[DONE\]\n\n$/)
    assert.deepEqual(upstream.seen.at(-1)!.body!.stream_options, { include_usage: true })
    assert.match(await ask({ stream_options: { include_usage: true } }), /"choices":\[\],"usage":\{"prompt_tokens":19/)
  })

  test('legacy completions: JSON and streams settle at their usage; a long stream is counted and cut with finish_reason "length"', async () => {
    const client = new OpenAI({ apiKey: 'sk-legacy', baseURL: `${gw.url}/cut/v1`, maxRetries: 0 })
    const json = await settled('cut', () => client.completions.create({ model: 'gpt-3.5-turbo-instruct', prompt: 'Say this is a test' }))
    assert.equal(json.used, 12)
    const cut = await settled('cut', async () => {
      const chunks = []
      for await (const c of await client.completions.create({
        model: 'gpt-3.5-turbo-instruct',
        prompt: 'Say this is a test',
        stream: true,
      }))
        chunks.push(c)
      return chunks
    })
    const text = cut.result.map((c) => c.choices[0]?.text ?? '').join('')
    assert.equal(text.length, 6 * 40, 'cut after the delta that passed 50 tokens (60)')
    assert.equal(cut.result.at(-2)!.choices[0]!.finish_reason, 'length')
    const usage = cut.result.at(-1)!.usage!
    assert.equal(usage.completion_tokens, 60)
    assert.equal(cut.used, usage.total_tokens)
    const free = await settled('free', async () => {
      const c = new OpenAI({ apiKey: 'sk-legacy', baseURL: `${gw.url}/free/v1`, maxRetries: 0 })
      for await (const _ of await c.completions.create({ model: 'gpt-3.5-turbo-instruct', prompt: 'x', stream: true })) {
        // drained
      }
    })
    assert.equal(free.used, 116, 'the usage the gateway asked for')
  })

  test('a Chinese reply without usage is counted by its script: cut at 60 tokens after 60 characters, not 240', async () => {
    const client = new OpenAI({ apiKey: 'sk-cjk', baseURL: `${gw.url}/cjk/v1`, maxRetries: 0 })
    const r = await settled('cjk', () =>
      client.chat.completions.stream({ model: 'qwen', messages: [{ role: 'user', content: 'abcd' }] }).finalChatCompletion(),
    )
    assert.equal(r.result.choices[0]!.finish_reason, 'length')
    assert.equal([...r.result.choices[0]!.message.content!].length, 60)
    assert.equal(r.used, 1 + 60)
  })

  test('audio deltas are counted (20 tokens a second, the transcript as text) and cut', async () => {
    const r = await fetch(`${gw.url}/audio/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer sk-audio' },
      body: JSON.stringify({
        model: 'gpt-4o-audio-preview',
        modalities: ['text', 'audio'],
        audio: { voice: 'alloy', format: 'pcm16' },
        stream: true,
        messages: [{ role: 'user', content: 'hi' }],
      }),
    })
    const events = (await r.text()).split('\n\n').filter((e) => e.startsWith('data: {'))
    const audio = events.filter((e) => e.includes('"audio":{'))
    assert.equal(audio.length, 3, '22 tokens a delta: 66 passes 50')
    assert.match(events.at(-2)!, /"finish_reason":"length"/)
  })

  test("Groq's x_groq.usage settles the stream; a rule with a tokenizer counts a stream without usage with it", async () => {
    const groq = await settled('groq', () => callClient('openai', { root: `${gw.url}/groq`, apiKey: 'sk-groq', stream: true }))
    assert.equal(groq.used, 103)
    const tok = await settled('tok', () => callClient('openai', { root: `${gw.url}/tok`, apiKey: 'sk-tok', stream: true, prompt: 'abcd' }))
    const count = tokenCounter('o200k_base')
    const deltas = fixture('chat-cjk-stream.sse')
      .split('\n\n')
      .filter((e) => e.startsWith('data: {'))
      .map((e) => (JSON.parse(e.slice(6)) as { choices: { delta: { content?: string } }[] }).choices[0]?.delta.content ?? '')
    const completion = deltas.reduce((a, d) => a + (d === '' ? 0 : count(d)), 0)
    assert.equal(tok.used, count('abcd') + 3 + 3 + completion)
  })
})
