/**
 * Reservations that fit the call (docs/llm.md "Reservations"), through the real gateway with
 * the OpenAI SDK: under the shipped policies/llm-openai.json a file upload, an audio
 * transcription (multipart, larger than the bundle's max_prompt_tokens at 4 bytes a token) and a
 * batch creation pass untouched and reserve nothing; a request for `n` choices reserves n times
 * its completion, and its stream is cut at n times max_completion_tokens, every choice ending
 * with finish_reason "length".
 */
import assert from 'node:assert/strict'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import OpenAI, { toFile } from 'openai'
import { startApiLlm, type ApiLlm } from '../helpers/api-llm.js'
import { startGateway, type GatewayProcess } from '../helpers/processes.js'

/** A Chat Completions stream of `choices` choices, each six 40-character deltas (10 tokens each), interleaved. */
function choicesStream(choices: number): string {
  const head = { id: 'chatcmpl-n', object: 'chat.completion.chunk', created: 1732406400, model: 'gpt-4o-mini' }
  let out = ''
  for (let i = 0; i < 6; i++)
    for (let c = 0; c < choices; c++)
      out += `data: ${JSON.stringify({ ...head, choices: [{ index: c, delta: { ...(i === 0 ? { role: 'assistant' } : {}), content: 'abcdefghi '.repeat(4) }, finish_reason: null }] })}\n\n`
  for (let c = 0; c < choices; c++)
    out += `data: ${JSON.stringify({ ...head, choices: [{ index: c, delta: {}, finish_reason: 'stop' }] })}\n\n`
  return `${out}data: [DONE]\n\n`
}

const FILE = { id: 'file-abc123', object: 'file', bytes: 200_000, created_at: 1677610602, filename: 'requests.jsonl', purpose: 'batch' }
const BATCH = {
  id: 'batch_abc123',
  object: 'batch',
  endpoint: '/v1/chat/completions',
  errors: null,
  input_file_id: 'file-abc123',
  completion_window: '24h',
  status: 'validating',
  output_file_id: null,
  error_file_id: null,
  created_at: 1711471533,
  request_counts: { total: 0, completed: 0, failed: 0 },
  metadata: null,
}

let upstream: ApiLlm
let shipped: GatewayProcess
let cut: GatewayProcess

describe('reservations that fit the call', { timeout: 60_000 }, () => {
  before(async () => {
    upstream = await startApiLlm((r) => {
      if (r.path.endsWith('/files')) return { body: JSON.stringify(FILE) }
      if (r.path.endsWith('/batches')) return { body: JSON.stringify(BATCH) }
      if (r.path.endsWith('/audio/transcriptions'))
        return { body: JSON.stringify({ text: 'Rate limits keep shared capacity fair.', usage: { type: 'duration', seconds: 9 } }) }
      if (typeof r.body?.n === 'number') return { fixture: 'chat-stream.sse', body: choicesStream(r.body.n) }
      return undefined
    })
    const dir = mkdtempSync(join(tmpdir(), 'fv-reserve-'))
    const bundle = join(dir, 'bundle.json')
    writeFileSync(
      bundle,
      JSON.stringify({
        bundle_version: 1,
        policies: [
          {
            id: 'cut',
            spec: {
              selector: { pathPrefix: '/' },
              mode: 'enforce',
              rules: [
                {
                  name: 'tokens',
                  limit_keys: ['llm:api_key'],
                  algorithm: 'token_bucket_llm',
                  algorithm_config: { tokens_per_minute: 100_000, max_completion_tokens: 50, streaming: { buffer_tokens: 10 } },
                },
              ],
            },
          },
        ],
      }),
    )
    ;[shipped, cut] = await Promise.all([
      startGateway({ FAIRVISOR_BACKEND_URL: upstream.url, FAIRVISOR_CONFIG_FILE: 'policies/llm-openai.json', FAIRVISOR_STORE: 'memory' }),
      startGateway({ FAIRVISOR_BACKEND_URL: upstream.url, FAIRVISOR_CONFIG_FILE: bundle, FAIRVISOR_STORE: 'memory' }),
    ])
  })

  after(async () => {
    const codes = await Promise.all([shipped?.stop(), cut?.stop()])
    await upstream?.close()
    assert.deepEqual(codes, [0, 0])
  })

  test('the shipped OpenAI bundle passes uploads, transcriptions and batches whole and reserves nothing for them', async () => {
    const client = new OpenAI({ apiKey: 'sk-files', baseURL: `${shipped.url}/v1`, maxRetries: 0 })
    // 200 KB: 50,000 tokens at 4 bytes a token, over the bundle's max_prompt_tokens (16,000).
    const bytes = Buffer.alloc(200_000, 'a')
    const file = await client.files.create({ file: await toFile(bytes, 'requests.jsonl'), purpose: 'batch' })
    assert.equal(file.id, 'file-abc123')
    const text = await client.audio.transcriptions.create({ file: await toFile(bytes, 'talk.mp3'), model: 'whisper-1' })
    assert.match(text.text, /Rate limits/)
    const batch = await client.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' })
    assert.equal(batch.status, 'validating')
    const uploads = upstream.seen.filter((r) => r.path.endsWith('/files') || r.path.endsWith('/transcriptions'))
    assert.equal(uploads.length, 2)
    for (const u of uploads) assert.ok(Number(u.headers['content-length']) > 200_000, 'forwarded whole')
    // The key's bucket is whole: a chat call's RateLimit-Remaining is 30,000 less its own reservation only.
    const r = await client.chat.completions
      .create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }], max_tokens: 100 })
      .withResponse()
    const reserved = 100 + 1 + 3 + 3 // max_tokens, "hi", one message's framing, the reply's
    assert.equal(r.response.headers.get('ratelimit-remaining'), String(30_000 - reserved))
  })

  test('n choices reserve n completions, and their stream is cut at n times max_completion_tokens', async () => {
    const client = (key: string) => new OpenAI({ apiKey: key, baseURL: `${cut.url}/v1`, maxRetries: 0 })
    const one = await client('sk-n1')
      .chat.completions.stream({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'x' }], max_tokens: 40, n: 1 })
      .finalChatCompletion()
    assert.deepEqual(
      one.choices.map((c) => [c.finish_reason, c.message.content!.length]),
      [['length', 6 * 40]],
    )
    const two = await client('sk-n2')
      .chat.completions.stream({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'x' }], max_tokens: 40, n: 2 })
      .finalChatCompletion()
    // 120 tokens in all, cut past 100 (2 × 50) at the next multiple of 10: after the 11th delta.
    assert.deepEqual(
      two.choices.map((c) => [c.index, c.finish_reason, c.message.content!.length]),
      [
        [0, 'length', 6 * 40],
        [1, 'length', 5 * 40],
      ],
    )
    const r = await client('sk-n3')
      .chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'x' }], max_tokens: 40, n: 3, stream: true })
      .withResponse()
    for await (const _ of r.data) {
      // drained
    }
    assert.equal(r.response.headers.get('ratelimit-remaining'), String(100_000 - (1 + 3 * 40)))
  })
})
