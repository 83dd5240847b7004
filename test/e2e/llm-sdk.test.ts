/**
 * The official SDKs (`openai` 6.x, `@anthropic-ai/sdk`) driving the real
 * gateway process in front of an upstream that replays recorded OpenAI and
 * Anthropic responses (test/fixtures/llm/): every usage shape settles at
 * the recorded usage (read from fairvisor_tokens_consumed_total), a cut
 * stream is a finished answer to each SDK's stream helper, a compressed,
 * CRLF, byte-split or Content-Length SSE upstream is cut at the same token
 * count, error_chunk surfaces as each SDK's API error, and rejects as its
 * RateLimitError, or its BadRequestError for a request too large for its rule
 * (retry advice in the headers the SDKs read).
 */
import assert from 'node:assert/strict'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import Anthropic from '@anthropic-ai/sdk'
import OpenAI from 'openai'
import { metricValue, startGateway, type GatewayProcess } from '../helpers/processes.js'
import { fixture, startReplayLlm, type ReplayLlm } from '../helpers/replay-llm.js'

const RUN = `${process.pid}_${Date.now()}`
const MESSAGES = [{ role: 'user' as const, content: 'Tell me about rate limits.' }]
const CUT_TEXT = 6 * 40 // six 40-character deltas (60 tokens) pass a 50-token cap in steps of 10

function writeBundle(dir: string): string {
  const rule = (name: string, extra: object): object => ({
    name: `${name}_${RUN}`,
    limit_keys: ['header:x-tenant'],
    algorithm: 'token_bucket_llm',
    algorithm_config: { tokens_per_minute: 60, burst_tokens: 1_000_000, ...extra },
  })
  const p = (id: string, extra: object = {}): object => ({
    id,
    spec: { selector: { pathPrefix: `/${id}/` }, mode: 'enforce', rules: [rule(id, extra)] },
  })
  const cut = { max_completion_tokens: 50, streaming: { buffer_tokens: 10 } }
  const file = join(dir, 'bundle.json')
  writeFileSync(
    file,
    JSON.stringify({
      bundle_version: 1,
      policies: [
        p('free'),
        p('cut', cut),
        p('nomid', { ...cut, streaming: { buffer_tokens: 10, enforce_mid_stream: false } }),
        p('err', { ...cut, streaming: { buffer_tokens: 10, on_limit_exceeded: 'error_chunk' } }),
        p('few', { burst_tokens: 300 }),
        p('prompt', { max_prompt_tokens: 1 }),
        p('request', { max_tokens_per_request: 100 }),
      ],
    }),
  )
  return file
}

let upstream: ReplayLlm
let gw: GatewayProcess
let tenant = 0

function openai(policy: string, fix: string, headers: Record<string, string> = {}): OpenAI {
  return new OpenAI({
    apiKey: 'sk-test',
    baseURL: `${gw.url}/${policy}/v1`,
    maxRetries: 0,
    defaultHeaders: { 'x-tenant': `t${tenant++}`, 'x-fixture': fix, ...headers },
  })
}

function anthropic(policy: string, fix: string, headers: Record<string, string> = {}): Anthropic {
  return new Anthropic({
    apiKey: 'sk-ant-test',
    baseURL: `${gw.url}/${policy}`,
    maxRetries: 0,
    defaultHeaders: { 'x-tenant': `t${tenant++}`, 'x-fixture': fix, ...headers },
  })
}

/** Runs `call`, then waits for the policy's consumed-tokens counter to move (the settlement) and returns by how much. */
async function settled<T>(policy: string, call: () => Promise<T>): Promise<{ result: T; used: number }> {
  const read = async (): Promise<number> => (await metricValue(gw, 'fairvisor_tokens_consumed_total', `policy="${policy}"`)) ?? 0
  const before = await read()
  const result = await call()
  const deadline = Date.now() + 10_000
  for (;;) {
    const now = await read()
    if (now !== before) return { result, used: now - before }
    assert.ok(Date.now() < deadline, `no settlement for ${policy}`)
    await new Promise((r) => setTimeout(r, 10))
  }
}

async function rejection(p: Promise<unknown>): Promise<Error & { status?: number; headers?: Headers; error?: unknown }> {
  try {
    await p
  } catch (err) {
    return err as Error
  }
  assert.fail('the call succeeded')
}

describe('the official SDKs through the gateway', { timeout: 120_000 }, () => {
  before(async () => {
    upstream = await startReplayLlm()
    gw = await startGateway({
      FAIRVISOR_BACKEND_URL: upstream.url,
      FAIRVISOR_CONFIG_FILE: writeBundle(mkdtempSync(join(tmpdir(), 'fv-sdk-'))),
      FAIRVISOR_STORE: 'memory',
    })
  })

  after(async () => {
    const code = await gw?.stop()
    await upstream?.close()
    assert.equal(code, 0)
  })

  test('Chat Completions JSON and SSE settle at the recorded usage; the upstream is asked for identity', async () => {
    const json = await settled('free', () =>
      openai('free', 'chat.json').chat.completions.create({ model: 'gpt-4o-mini', messages: MESSAGES, max_tokens: 100 }),
    )
    assert.equal(json.result.choices[0]!.message.content, 'Hello! How can I help you today?')
    assert.equal(json.used, 28)
    assert.equal(upstream.acceptEncodings.at(-1), 'identity')
    const sse = await settled('free', () =>
      openai('free', 'chat-stream.sse')
        .chat.completions.stream({ model: 'gpt-4o-mini', messages: MESSAGES, stream_options: { include_usage: true } })
        .finalChatCompletion(),
    )
    assert.equal(sse.result.choices[0]!.finish_reason, 'stop')
    assert.equal(sse.used, 200)
    const tools = await settled('free', () =>
      openai('free', 'chat-tools-stream.sse').chat.completions.stream({ model: 'gpt-4o', messages: MESSAGES }).finalChatCompletion(),
    )
    assert.equal(tools.result.choices[0]!.finish_reason, 'tool_calls')
    assert.equal(tools.used, 294)
  })

  test('a compressed upstream is decoded: the client gets plain bytes and the usage settles', async () => {
    for (const enc of ['gzip', 'deflate', 'br']) {
      const r = await settled('free', () =>
        openai('free', 'chat-stream.sse', { 'x-encode': enc })
          .chat.completions.stream({ model: 'gpt-4o-mini', messages: MESSAGES, stream_options: { include_usage: true } })
          .finalChatCompletion(),
      )
      assert.equal(r.result.choices[0]!.finish_reason, 'stop', enc)
      assert.equal(r.used, 200, enc)
      const j = await settled('free', () =>
        openai('free', 'chat.json', { 'x-encode': enc }).chat.completions.create({
          model: 'gpt-4o-mini',
          messages: MESSAGES,
          max_tokens: 100,
        }),
      )
      assert.equal(j.used, 28, enc)
    }
  })

  test('embeddings (prompt tokens only) settle with no completion', async () => {
    const r = await settled('free', () =>
      openai('free', 'embeddings.json').embeddings.create({
        model: 'text-embedding-3-small',
        input: 'The food was delicious',
        encoding_format: 'float',
      }),
    )
    assert.equal(r.result.data[0]!.embedding.length, 4)
    assert.equal(r.used, 8)
  })

  test('a cut Chat Completions stream ends with finish_reason "length" for the SDK, the same on every framing and coding', async () => {
    const variants: Record<string, string>[] = [
      {},
      { 'x-encode': 'gzip' },
      { 'x-encode': 'br', 'x-split': '5' },
      { 'x-content-length': '1' },
      { 'x-crlf': '1', 'x-split': '7' },
      { 'x-content-length': '1', 'x-encode': 'gzip', 'x-crlf': '1' },
    ]
    for (const v of variants) {
      const what = JSON.stringify(v)
      const r = await settled('cut', () =>
        openai('cut', 'chat-stream.sse', v)
          .chat.completions.stream({ model: 'gpt-4o-mini', messages: MESSAGES, stream_options: { include_usage: true } })
          .finalChatCompletion(),
      )
      assert.equal(r.result.choices[0]!.finish_reason, 'length', what)
      assert.equal(r.result.choices[0]!.message.content!.length, CUT_TEXT, what)
      assert.equal(r.result.id, 'chatcmpl-AX7sK2nQpL4vR9tYbE3mWfHc1uDzO', what)
      assert.equal(r.result.usage!.completion_tokens, 60, what)
      assert.equal(r.used, r.result.usage!.total_tokens, what)
    }
  })

  test('an enforce policy that does not cut mid-stream logs would_truncate with its reason, not as shadow', async () => {
    const r = await openai('nomid', 'chat-stream.sse')
      .chat.completions.stream({ model: 'gpt-4o-mini', messages: MESSAGES })
      .finalChatCompletion()
    assert.equal(r.choices[0]!.finish_reason, 'stop')
    const line = await gw.waitForLog((l) => l.event === 'would_truncate' && String(l.policy) === 'nomid')
    assert.equal(line.why, 'enforce_mid_stream_off')
    assert.doesNotMatch(line.msg, /shadow/)
  })

  test("a response the gateway may cut or decodes is sent chunked, without the upstream's Content-Length or Content-Encoding", async () => {
    const post = (policy: string, headers: Record<string, string>): Promise<Response> =>
      fetch(`${gw.url}/${policy}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-tenant': `t${tenant++}`, 'x-fixture': 'chat-stream.sse', ...headers },
        body: JSON.stringify({ model: 'm', messages: MESSAGES, stream: true }),
      })
    const cut = await post('cut', { 'x-content-length': '1' })
    assert.equal(cut.headers.get('content-length'), null)
    assert.equal(cut.headers.get('transfer-encoding'), 'chunked')
    assert.match(await cut.text(), /"finish_reason":"length"[^\n]*\n\ndata: \{[^\n]*"choices":\[\],"usage"[^\n]*\n\ndata: \[DONE\]\n\n$/)
    const gz = await post('free', { 'x-encode': 'gzip', 'accept-encoding': 'gzip' })
    assert.equal(gz.headers.get('content-encoding'), null)
    assert.match(await gz.text(), /^data: \{"id":"chatcmpl-AX7sK2nQpL4vR9tYbE3mWfHc1uDzO"/)
    assert.equal(upstream.acceptEncodings.at(-1), 'identity')
  })

  test('tool-call argument deltas count toward the cut, which waits for the call to end (and charges what it waited for)', async () => {
    const { result: r, used } = await settled('cut', () =>
      openai('cut', 'chat-tools-stream.sse').chat.completions.stream({ model: 'gpt-4o', messages: MESSAGES }).finalChatCompletion(),
    )
    assert.equal(r.choices[0]!.finish_reason, 'length')
    assert.equal(r.choices[0]!.message.tool_calls![0]!.type, 'function')
    const call = r.choices[0]!.message.tool_calls![0]! as { function: { name: string; arguments: string } }
    assert.equal(call.function.name, 'get_weather')
    // Passed at 60 tokens (240 characters), inside the call: the cut came after its last delta, 800 characters.
    assert.equal(call.function.arguments.length, 800)
    assert.equal(JSON.parse(call.function.arguments).city, 'Lisbon')
    assert.equal(r.usage!.completion_tokens, 200)
    assert.equal(used, r.usage!.total_tokens)
  })

  test('Responses API: settles at the recorded usage; a cut stream is status "incomplete" with the text so far', async () => {
    const full = await settled('free', () =>
      openai('free', 'responses-stream.sse').responses.stream({ model: 'gpt-4.1', input: 'Tell me about rate limits.' }).finalResponse(),
    )
    assert.equal(full.result.status, 'completed')
    assert.equal(full.used, 220)
    const cut = await settled('cut', () =>
      openai('cut', 'responses-stream.sse', { 'x-encode': 'gzip' })
        .responses.stream({ model: 'gpt-4.1', input: 'Tell me about rate limits.' })
        .finalResponse(),
    )
    assert.equal(cut.result.status, 'incomplete')
    assert.equal(cut.result.incomplete_details?.reason, 'max_output_tokens')
    assert.equal(cut.result.output_text.length, CUT_TEXT)
    assert.equal(cut.result.usage!.output_tokens, 60)
    assert.equal(cut.used, cut.result.usage!.total_tokens)
  })

  test('Anthropic Messages: JSON with cache tokens and SSE settle at the recorded usage; a cut stream is stop_reason "max_tokens"', async () => {
    const json = await settled('free', () =>
      anthropic('free', 'messages.json').messages.create({ model: 'claude-haiku-4-5', max_tokens: 100, messages: MESSAGES }),
    )
    assert.equal(json.result.stop_reason, 'end_turn')
    assert.equal(json.used, 12 + 100 + 2000 + 6)
    const sse = await settled('free', () =>
      anthropic('free', 'messages-stream.sse')
        .messages.stream({ model: 'claude-haiku-4-5', max_tokens: 1000, messages: MESSAGES })
        .finalMessage(),
    )
    assert.equal(sse.result.stop_reason, 'end_turn')
    assert.equal(sse.used, 25 + 40 + 187)
    const cut = await settled('cut', () =>
      anthropic('cut', 'messages-stream.sse', { 'x-crlf': '1', 'x-split': '3' })
        .messages.stream({ model: 'claude-haiku-4-5', max_tokens: 1000, messages: MESSAGES })
        .finalMessage(),
    )
    assert.equal(cut.result.stop_reason, 'max_tokens')
    const block = cut.result.content[0]!
    assert.equal(block.type === 'text' ? block.text.length : -1, CUT_TEXT)
    assert.equal(cut.result.usage.output_tokens, 60)
    assert.equal(cut.used, 25 + 40 + 60) // message_start's input; the counted output, not its placeholder
  })

  test('thinking deltas count toward the cut and settle at the recorded usage', async () => {
    const full = await settled('free', () =>
      anthropic('free', 'messages-thinking-stream.sse')
        .messages.stream({ model: 'claude-haiku-4-5', max_tokens: 2000, messages: MESSAGES })
        .finalMessage(),
    )
    assert.equal(full.used, 41 + 212)
    const cut = await anthropic('cut', 'messages-thinking-stream.sse')
      .messages.stream({ model: 'claude-haiku-4-5', max_tokens: 2000, messages: MESSAGES })
      .finalMessage()
    assert.equal(cut.stop_reason, 'max_tokens')
    const block = cut.content[0]!
    assert.equal(block.type === 'thinking' ? block.thinking.length : -1, CUT_TEXT)
  })

  test("an Anthropic stream the client leaves settles on the tokens counted, not message_start's placeholder", async () => {
    const text = fixture('messages-stream.sse')
    let at = 0
    for (let i = 0; i < 5; i++) at = text.indexOf('\n\n', text.indexOf('event: content_block_delta', at)) + 2
    const r = await settled('free', async () => {
      const stream = anthropic('free', 'messages-stream.sse', { 'x-hold-after': String(at) }).messages.stream({
        model: 'claude-haiku-4-5',
        max_tokens: 1000,
        messages: MESSAGES,
      })
      let deltas = 0
      await new Promise<void>((resolve) => {
        stream.on('text', () => {
          if (++deltas === 5) {
            stream.abort()
            resolve()
          }
        })
      })
      await stream.done().catch(() => undefined)
    })
    assert.equal(r.used, 25 + 40 + 50)
  })

  test("error_chunk surfaces as each SDK's API error", async () => {
    const chat = await rejection(
      openai('err', 'chat-stream.sse').chat.completions.stream({ model: 'gpt-4o-mini', messages: MESSAGES }).finalChatCompletion(),
    )
    assert.ok(chat instanceof OpenAI.APIError, String(chat))
    assert.match(chat.message, /max completion tokens exceeded/)
    const responses = await rejection(
      openai('err', 'responses-stream.sse').responses.stream({ model: 'gpt-4.1', input: 'x' }).finalResponse(),
    )
    assert.ok(responses instanceof OpenAI.APIError, String(responses))
    const messages = await rejection(
      anthropic('err', 'messages-stream.sse')
        .messages.stream({ model: 'claude-haiku-4-5', max_tokens: 1000, messages: MESSAGES })
        .finalMessage(),
    )
    assert.ok(messages instanceof Anthropic.APIError, String(messages))
    assert.match(messages.message, /rate_limit_error/)
  })

  test("rejects that can pass are each SDK's RateLimitError; a request too large for its rule is its BadRequestError with x-should-retry: false and no Retry-After", async () => {
    // A stream held open keeps its reservation (7 + 250 of 300 tokens, refilling 1 a second): a call of 87 fits 44 s later.
    const hold = async (tenant: string): Promise<AbortController> => {
      const c = new AbortController()
      const r = await fetch(`${gw.url}/few/v1/chat/completions`, {
        method: 'POST',
        signal: c.signal,
        headers: {
          'content-type': 'application/json',
          'x-tenant': tenant,
          'x-fixture': 'chat-stream.sse',
          'x-hold-after': String(fixture('chat-stream.sse').indexOf('\n\n') + 2),
        },
        body: JSON.stringify({ model: 'm', messages: MESSAGES, max_tokens: 250, stream: true }),
      })
      assert.equal(r.status, 200)
      return c
    }
    const heldO = await hold(`held-o-${RUN}`)
    const tpm = await rejection(
      openai('few', 'chat.json', { 'x-tenant': `held-o-${RUN}` }).chat.completions.create({
        model: 'gpt-4o-mini',
        messages: MESSAGES,
        max_tokens: 80,
      }),
    )
    heldO.abort()
    assert.ok(tpm instanceof OpenAI.RateLimitError, String(tpm))
    const wait = Number(tpm.headers!.get('retry-after'))
    assert.ok(wait >= 44 && wait <= 60, `Retry-After ${wait}: the wait, jittered within FAIRVISOR_LLM_MAX_RETRY_AFTER`)
    const heldA = await hold(`held-a-${RUN}`)
    const atpm = await rejection(
      anthropic('few', 'messages.json', { 'x-tenant': `held-a-${RUN}` }).messages.create({
        model: 'claude-haiku-4-5',
        max_tokens: 80,
        messages: MESSAGES,
      }),
    )
    heldA.abort()
    assert.ok(atpm instanceof Anthropic.RateLimitError, String(atpm))
    assert.equal((atpm.error as { type: string; error: { type: string } }).error.type, 'rate_limit_error')
    assert.ok(Number(atpm.headers!.get('retry-after')) > 0)
    const burst = await rejection(
      openai('few', 'chat.json').chat.completions.create({ model: 'gpt-4o-mini', messages: MESSAGES, max_tokens: 1000 }),
    )
    assert.ok(burst instanceof OpenAI.BadRequestError, String(burst))
    assert.equal((burst.error as { code?: string }).code, 'burst_tokens_exceeded')
    assert.match(burst.message, /\(1007 tokens\) exceed what this API key's token bucket can ever hold \(300 tokens\)/)
    for (const policy of ['prompt', 'request']) {
      const o = await rejection(
        openai(policy, 'chat.json').chat.completions.create({ model: 'gpt-4o-mini', messages: MESSAGES, max_tokens: 500 }),
      )
      assert.ok(o instanceof OpenAI.BadRequestError, String(o))
      assert.equal((o.error as { code?: string }).code, `${policy === 'prompt' ? 'prompt_tokens' : 'max_tokens_per_request'}_exceeded`)
      assert.equal(o.headers!.get('x-should-retry'), 'false', policy)
      assert.equal(o.headers!.get('retry-after'), null, policy)
      const a = await rejection(
        anthropic(policy, 'messages.json').messages.create({ model: 'claude-haiku-4-5', max_tokens: 500, messages: MESSAGES }),
      )
      assert.ok(a instanceof Anthropic.BadRequestError, String(a))
      assert.equal((a.error as { error: { type: string } }).error.type, 'invalid_request_error')
      assert.equal(a.headers!.get('x-should-retry'), 'false', policy)
    }
  })
})
