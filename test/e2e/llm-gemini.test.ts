/**
 * Gemini's native API through the real gateway with the shipped policies/llm-gemini.json,
 * driven by Google's own SDK (@google/genai, its baseUrl at the gateway) and by plain fetch
 * for what the SDK does not send (the JSON array stream, `?key=`), against an upstream
 * answering in the shapes of the public reference (test/helpers/gemini-upstream.ts): calls
 * are keyed on the key the API reads, counted (each settles at the usageMetadata the
 * upstream reports), cut (the SDK's last chunk has finishReason MAX_TOKENS; the JSON array
 * stays one JSON array) and limited (429 in Google's error shape, which the SDK raises as
 * an ApiError). A second bundle ends streams with error_chunk: the SDK raises it.
 */
import assert from 'node:assert/strict'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { ApiError, FinishReason, GoogleGenAI } from '@google/genai'
import { chunkText, PROMPT_TOKENS, startGeminiUpstream, THOUGHT_TOKENS, type GeminiUpstream } from '../helpers/gemini-upstream.js'
import { consumed, settled } from '../helpers/llm-settle.js'
import { startGateway, type GatewayProcess } from '../helpers/processes.js'

const MODEL = 'gemini-2.5-flash'
let up: GeminiUpstream
let gw: GatewayProcess
let keys = 0

function genai(headers: Record<string, string> = {}, apiKey = `AIza-test-${process.pid}-${keys++}`, url = gw.url): GoogleGenAI {
  return new GoogleGenAI({ apiKey, httpOptions: { baseUrl: url, headers } })
}

async function joined(stream: AsyncGenerator<{ text?: string }>): Promise<{ text: string; chunks: Record<string, unknown>[] }> {
  let text = ''
  const chunks: Record<string, unknown>[] = []
  for await (const c of stream) {
    text += c.text ?? ''
    chunks.push(c as Record<string, unknown>)
  }
  return { text, chunks }
}

describe('Gemini (policies/llm-gemini.json) with @google/genai', { timeout: 180_000 }, () => {
  before(async () => {
    up = await startGeminiUpstream()
    gw = await startGateway({
      FAIRVISOR_BACKEND_URL: up.url,
      FAIRVISOR_CONFIG_FILE: 'policies/llm-gemini.json',
      FAIRVISOR_STORE: 'memory',
      FAIRVISOR_ACCESS_LOG: 'true',
    })
  })

  after(async () => {
    const code = await gw?.stop()
    await up?.close()
    assert.equal(code, 0)
  })

  test('generateContent settles at usageMetadata; the key reaches the upstream in x-goog-api-key', async () => {
    const ai = genai({ 'x-chunks': '5', 'x-usage-out': '300' })
    const r = await settled(gw, 'gemini', () =>
      ai.models.generateContent({ model: MODEL, contents: 'Tell me about rate limits.', config: { maxOutputTokens: 500 } }),
    )
    assert.equal(r.result.candidates?.[0]?.finishReason, FinishReason.STOP)
    assert.equal(r.used, PROMPT_TOKENS + 300 + THOUGHT_TOKENS)
    const seen = up.requests.at(-1)!
    assert.match(seen.url, /^\/v1beta\/models\/gemini-2\.5-flash:generateContent$/)
    assert.ok(String(seen.headers['x-goog-api-key']).startsWith('AIza-test-'))
  })

  test('generateContentStream (SSE) settles at the last chunk usageMetadata; the text passes whole', async () => {
    const ai = genai({ 'x-chunks': '8', 'x-usage-out': '90' })
    const r = await settled(gw, 'gemini', async () =>
      joined(await ai.models.generateContentStream({ model: MODEL, contents: 'Tell me about rate limits.' })),
    )
    assert.equal(r.result.text, Array.from({ length: 8 }, (_, i) => chunkText(i, 40)).join(''))
    assert.equal(r.used, PROMPT_TOKENS + 90 + THOUGHT_TOKENS)
    assert.match(up.requests.at(-1)!.url, /:streamGenerateContent\?alt=sse$/)
  })

  test('a stream past 8192 counted tokens is cut: the SDK ends on finishReason MAX_TOKENS with the usage so far', async () => {
    // 60 chunks of 800 characters: 200 tokens each, 12000 in all.
    const ai = genai({ 'x-chunks': '60', 'x-chunk-chars': '800' })
    const r = await settled(gw, 'gemini', async () =>
      joined(await ai.models.generateContentStream({ model: MODEL, contents: 'Write a long story.', config: { maxOutputTokens: 60000 } })),
    )
    const last = r.result.chunks.at(-1) as { candidates: { finishReason: string; index: number }[]; usageMetadata: Record<string, number> }
    assert.equal(last.candidates[0]!.finishReason, FinishReason.MAX_TOKENS)
    assert.equal(last.candidates[0]!.index, 0)
    assert.equal(last.usageMetadata.promptTokenCount, PROMPT_TOKENS, 'the prompt as the upstream reported it')
    const counted = last.usageMetadata.candidatesTokenCount!
    assert.ok(counted > 8192 && counted <= 8192 + 200, `cut within one buffer past 8192 (${counted})`)
    assert.equal(r.result.text.length, counted * 4, 'the text up to the chunk that went over')
    assert.equal(r.result.chunks.length, counted / 200 + 1)
    assert.equal(r.used, PROMPT_TOKENS + counted, 'settled on what was streamed')
  })

  test('the JSON array stream (no alt=sse) with ?key= settles at usage; cut, it stays one array ending in MAX_TOKENS', async () => {
    const key = `AIza-query-${process.pid}`
    const call = (chunks: number, chars: number): Promise<Response> =>
      fetch(`${gw.url}/v1beta/models/${MODEL}:streamGenerateContent?key=${key}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-chunks': String(chunks), 'x-chunk-chars': String(chars) },
        body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'Hello' }] }], generationConfig: { maxOutputTokens: 9000 } }),
      })
    const whole = await settled(gw, 'gemini', async () => (await call(4, 40)).json())
    assert.equal((whole.result as unknown[]).length, 4)
    assert.equal(whole.used, PROMPT_TOKENS + 40 + THOUGHT_TOKENS)
    assert.equal(up.requests.at(-1)!.url, `/v1beta/models/${MODEL}:streamGenerateContent?key=${key}`)
    const cut = await settled(gw, 'gemini', async () => (await call(60, 800)).text())
    const list = JSON.parse(cut.result) as { candidates: { finishReason?: string }[]; usageMetadata: Record<string, number> }[]
    const last = list.at(-1)!
    assert.equal(last.candidates[0]!.finishReason, 'MAX_TOKENS')
    assert.equal(cut.used, PROMPT_TOKENS + last.usageMetadata.candidatesTokenCount!)
    assert.ok(list.length < 60)
    // The access log shows the key as its hash, never as sent.
    const line = await gw.waitForLog((l) => l.msg === 'access' && String(l.url).includes(':streamGenerateContent?key=sha256:'))
    assert.ok(!String(line.url).includes(key))
    assert.ok(!gw.logs.some((l) => JSON.stringify(l).includes(key)))
  })

  test('spent, a key gets 429 in Google error shape (ApiError); the same key by ?key= too; another key passes', async () => {
    const key = `AIza-spent-${process.pid}`
    // The upstream reports 70000 output tokens: the overrun takes the minute bucket (60000) to empty.
    await settled(gw, 'gemini', () =>
      genai({ 'x-usage-out': '70000' }, key).models.generateContent({ model: MODEL, contents: 'Hi', config: { maxOutputTokens: 100 } }),
    )
    const before = up.requests.length
    const err = await genai({}, key)
      .models.generateContent({ model: MODEL, contents: 'Hi again' })
      .then(
        () => assert.fail('allowed'),
        (e: unknown) => e,
      )
    assert.ok(err instanceof ApiError, String(err))
    assert.equal(err.status, 429)
    assert.match(err.message, /RESOURCE_EXHAUSTED/)
    const viaQuery = await fetch(`${gw.url}/v1beta/models/${MODEL}:generateContent?key=${key}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ contents: [{ parts: [{ text: 'Hi' }] }] }),
    })
    assert.equal(viaQuery.status, 429)
    assert.deepEqual(((await viaQuery.json()) as { error: { code: number; status: string } }).error.code, 429)
    assert.equal(up.requests.length, before, 'neither reached the upstream')
    const other = await genai().models.generateContent({ model: MODEL, contents: 'Hi' })
    assert.equal(other.candidates?.[0]?.finishReason, FinishReason.STOP)
  })

  test('two different keys (header and query) are refused 400 in Google error shape, before any charge', async () => {
    const before = await consumed(gw, 'gemini')
    const r = await fetch(`${gw.url}/v1beta/models/${MODEL}:generateContent?key=one`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-goog-api-key': 'two' },
      body: JSON.stringify({ contents: [{ parts: [{ text: 'Hi' }] }] }),
    })
    assert.equal(r.status, 400)
    assert.equal(((await r.json()) as { error: { status: string } }).error.status, 'INVALID_ARGUMENT')
    assert.equal(await consumed(gw, 'gemini'), before)
  })
})

describe('Gemini streams ended with error_chunk', { timeout: 120_000 }, () => {
  let up2: GeminiUpstream
  let gw2: GatewayProcess
  before(async () => {
    up2 = await startGeminiUpstream()
    const file = join(mkdtempSync(join(tmpdir(), 'fv-gemini-')), 'bundle.json')
    writeFileSync(
      file,
      JSON.stringify({
        bundle_version: 1,
        policies: [
          {
            id: 'gem-err',
            spec: {
              selector: { pathPrefix: '/v1beta/models/' },
              mode: 'enforce',
              rules: [
                {
                  name: `gem_err_${process.pid}`,
                  limit_keys: ['llm:api_key'],
                  algorithm: 'token_bucket_llm',
                  algorithm_config: {
                    tokens_per_minute: 100000,
                    max_completion_tokens: 50,
                    streaming: { buffer_tokens: 10, on_limit_exceeded: 'error_chunk' },
                  },
                },
              ],
            },
          },
        ],
      }),
    )
    gw2 = await startGateway({ FAIRVISOR_BACKEND_URL: up2.url, FAIRVISOR_CONFIG_FILE: file, FAIRVISOR_STORE: 'memory' })
  })

  after(async () => {
    await gw2?.stop()
    await up2?.close()
  })

  test('the SDK raises the error event after the chunks before it', async () => {
    const ai = genai({ 'x-chunks': '10', 'x-chunk-chars': '80' }, 'AIza-err', gw2.url)
    const seen: string[] = []
    const err = await (async () => {
      for await (const c of await ai.models.generateContentStream({ model: MODEL, contents: 'Hi' })) seen.push(c.text ?? '')
    })().then(
      () => assert.fail('the stream ended without an error'),
      (e: unknown) => e as Error,
    )
    // An ApiError when the error arrives in a read of its own; when it comes with the chunk before it, the SDK
    // cannot split them and raises this (as it does for Google's own mid-stream errors, googleapis/js-genai#461).
    assert.match(String(err), /max completion tokens exceeded|Incomplete JSON segment at the end/)
    assert.equal(seen.length, 3, 'three chunks of 20 tokens pass a 50-token cap')
  })
})
