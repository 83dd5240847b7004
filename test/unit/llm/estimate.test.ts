/**
 * token_bucket_llm pieces without a network: estimators, usage parsing, the
 * SSE meter's cut point, and the engine's pre-checks and day counter (a day
 * reject leaves the minute bucket untouched), with time passed in.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { estimatePrompt, tokenCounter } from '../../../src/llm/estimate.js'
import { parseLlmBody } from '../../../src/llm/request-body.js'
import { SseMeter } from '../../../src/llm/sse-meter.js'
import { collectUsage, deltaText, usageFromTail, type Usage } from '../../../src/llm/usage.js'
import { RequestView } from '../../../src/request/view.js'
import type { Decision } from '../../../src/engine/decision.js'
import { compile, Harness, T0, bundle, policy } from '../../helpers/engine-harness.js'

const chat = (content: string, extra: object = {}): Buffer =>
  Buffer.from(JSON.stringify({ model: 'm', messages: [{ role: 'user', content }], ...extra }))

test('simple_word: ceil(message characters / 4), else ceil(bytes / 4); header_hint reads X-Token-Estimate', () => {
  assert.equal(estimatePrompt('simple_word', 'o200k_base', parseLlmBody(chat('x'.repeat(401)), undefined), undefined), 101)
  assert.equal(estimatePrompt('simple_word', 'o200k_base', parseLlmBody(Buffer.from('not json at all!'), undefined), undefined), 4)
  assert.equal(estimatePrompt('header_hint', 'o200k_base', parseLlmBody(chat('abcd'), undefined), '250'), 250)
  assert.equal(estimatePrompt('header_hint', 'o200k_base', parseLlmBody(chat('abcd'), undefined), 'lots'), 1)
  // A body larger than what was held is estimated from Content-Length.
  assert.equal(estimatePrompt('simple_word', 'o200k_base', parseLlmBody(Buffer.from('{"messages":[{"content":"'), 4000), undefined), 1000)
})

test('tokenizer: the exact BPE count of the prompt plus chat framing; scaled by Content-Length when cut', () => {
  const text = 'The quick brown fox jumps over the lazy dog. '.repeat(20)
  const exact = tokenCounter('o200k_base')(text)
  assert.equal(estimatePrompt('tokenizer', 'o200k_base', parseLlmBody(chat(text), undefined), undefined), exact + 6)
  assert.notEqual(tokenCounter('cl100k_base')('ünïcödé ✓ 漢字'), 0)
  const held = Buffer.from(text)
  assert.equal(
    estimatePrompt('tokenizer', 'o200k_base', parseLlmBody(held, held.length * 3), undefined),
    Math.ceil(tokenCounter('o200k_base')(text) * 3),
  )
})

test('max_tokens, max_completion_tokens and max_output_tokens are the completion asked for; stream: true', () => {
  assert.equal(parseLlmBody(chat('a', { max_tokens: 7 }), undefined).maxTokens, 7)
  assert.equal(parseLlmBody(chat('a', { max_completion_tokens: 8 }), undefined).maxTokens, 8)
  assert.equal(parseLlmBody(chat('a', { max_output_tokens: 9, stream: true }), undefined).stream, true)
})

test('usage: OpenAI chat and Responses, Anthropic JSON and stream events (cumulative output), the tail of a large body', () => {
  const u = (...objs: object[]): Usage => {
    const into: Usage = { prompt: undefined, completion: undefined }
    for (const o of objs) collectUsage(o, into)
    return { prompt: into.prompt, completion: into.completion }
  }
  assert.deepEqual(u({ usage: { prompt_tokens: 3, completion_tokens: 4 } }), { prompt: 3, completion: 4 })
  assert.deepEqual(u({ type: 'response.completed', response: { usage: { input_tokens: 5, output_tokens: 6 } } }), {
    prompt: 5,
    completion: 6,
  })
  assert.deepEqual(
    u(
      { type: 'message_start', message: { usage: { input_tokens: 10, cache_read_input_tokens: 2, output_tokens: 1 } } },
      { type: 'message_delta', usage: { output_tokens: 30 } },
    ),
    { prompt: 12, completion: 30 },
  )
  const tail: Usage = { prompt: undefined, completion: undefined }
  usageFromTail('..."content":"a \\"usage\\": {"},"usage":{"prompt_tokens":7,"completion_tokens":8,"details":{"x":1}}}', tail)
  assert.deepEqual([tail.prompt, tail.completion], [7, 8])
  // A later message_delta repeating input_tokens alone keeps the cache tokens message_start reported.
  assert.deepEqual(
    u(
      {
        type: 'message_start',
        message: { usage: { input_tokens: 10, cache_creation_input_tokens: 5, cache_read_input_tokens: 2, output_tokens: 1 } },
      },
      { type: 'message_delta', usage: { input_tokens: 10, output_tokens: 30 } },
    ),
    { prompt: 17, completion: 30 },
  )
  assert.deepEqual(u({ object: 'list', usage: { prompt_tokens: 8, total_tokens: 8 } }), { prompt: 8, completion: undefined })
})

test('completion text of a stream event: message text, tool-call arguments and thinking in each API', () => {
  assert.equal(
    deltaText({
      choices: [
        { index: 0, delta: { content: 'ab' } },
        { index: 1, delta: { tool_calls: [{ index: 0, function: { arguments: '{"c' } }] } },
      ],
    }),
    'ab{"c',
  )
  assert.equal(deltaText({ type: 'content_block_delta', delta: { type: 'input_json_delta', partial_json: '{"x":' } }), '{"x":')
  assert.equal(deltaText({ type: 'content_block_delta', delta: { type: 'thinking_delta', thinking: 'hm' } }), 'hm')
  assert.equal(deltaText({ type: 'response.function_call_arguments.delta', delta: '{"q"' }), '{"q"')
  assert.equal(deltaText({ type: 'content_block_delta', delta: { type: 'signature_delta', signature: 'abc' } }), '')
})

test('the SSE meter cuts after the event that passes max_completion_tokens, at a multiple of buffer_tokens, across chunk splits', () => {
  const ev = (text: string): string => `data: ${JSON.stringify({ choices: [{ delta: { content: text } }] })}\n\n`
  const stream = Buffer.from(ev('a'.repeat(40)).repeat(3) + ev('b'.repeat(40)) + ev('c'.repeat(40)))
  let flagged = 0
  const m = new SseMeter([{ maxCompletion: 25, bufferTokens: 10, enforce: true, wouldTruncate: () => flagged++ }])
  // Fed in 7-byte pieces: the events pass whole, and the stream ends right after the third (30 tokens > 25).
  const passed: Buffer[] = []
  for (let i = 0; i < stream.length && m.ended === undefined; i += 7) {
    const out = m.feed(stream.subarray(i, i + 7))
    if (out !== undefined) passed.push(out)
  }
  assert.equal(m.ended, 'max_completion_tokens')
  assert.equal(Buffer.concat(passed).toString(), ev('a'.repeat(40)).repeat(3))
  assert.equal(m.counted, 30)
  assert.equal(flagged, 0)
  const shadow = new SseMeter([{ maxCompletion: 25, bufferTokens: 10, enforce: false, wouldTruncate: () => flagged++ }])
  assert.deepEqual(shadow.feed(stream), stream)
  assert.equal(shadow.ended, undefined)
  assert.equal(flagged, 1)
})

const llmPolicy = (config: object, mode = 'enforce'): object =>
  policy('p', [{ name: 'l', limit_keys: ['header:x-k'], algorithm: 'token_bucket_llm', algorithm_config: config }], { mode })

function run(h: Harness, body: Buffer, atS = 0): Decision {
  let d: Decision | undefined
  const v = new RequestView(
    {
      method: 'POST',
      path: '/x',
      rawQuery: '',
      host: 'h',
      rawHeaders: ['x-k', 'a', 'content-length', String(body.length)],
      peer: '10.0.0.1',
      body,
    },
    undefined,
  )
  h.engine.evaluate(h.bundle, v, T0 + atS * 1000, false, (x) => (d = x))
  return d!
}

test('pre-checks in the documented order reject without charging anything; shadow reports them and never rejects', () => {
  const h = new Harness(compile(bundle([llmPolicy({ tokens_per_minute: 10000, max_prompt_tokens: 50, max_tokens_per_request: 300 })])))
  const big = run(h, chat('x'.repeat(400), { max_tokens: 10 }))
  assert.equal(big.reason, 'prompt_tokens_exceeded')
  assert.equal(big.status, 400)
  assert.equal(run(h, chat('x'.repeat(100), { max_tokens: 290 })).reason, 'max_tokens_per_request_exceeded')
  const ok = run(h, chat('x'.repeat(100), { max_tokens: 200 }))
  assert.equal(ok.allowed, true)
  assert.equal(ok.limit?.remaining, 10000 - 225) // nothing was charged by the two rejects
  const s = new Harness(compile(bundle([llmPolicy({ tokens_per_minute: 10000, max_prompt_tokens: 50 }, 'shadow')])))
  assert.equal(run(s, chat('x'.repeat(400))).allowed, true)
  assert.deepEqual(
    s.obs.shadow.map((x) => x.reason),
    ['prompt_tokens_exceeded'],
  )
})

test('the reservation is max_tokens capped at max_completion_tokens; the day counter rejects at the next UTC midnight and the minute bucket is not charged', () => {
  const h = new Harness(compile(bundle([llmPolicy({ tokens_per_minute: 6000, tokens_per_day: 1000, max_completion_tokens: 400 })])))
  const a = run(h, chat('x'.repeat(400), { max_tokens: 5000 }))
  assert.deepEqual(
    a.llm?.map((r) => [r.prompt, r.reserved, r.day?.key]),
    [[100, 500, 'tpd:llm:l:a:20260101']],
  )
  assert.equal(run(h, chat('x'.repeat(400), { max_tokens: 400 })).allowed, true) // day: 1000
  const r = run(h, chat('x'.repeat(4), { max_tokens: 1 }), 1)
  assert.equal(r.reason, 'tpd_exceeded')
  assert.ok(r.retryAfterS! >= 86400 - 1 && r.retryAfterS! <= 86400 - 1 + 60, `Retry-After ${r.retryAfterS}`)
  assert.equal(r.status, 403, 'a day away is past the retry bound')
  // The minute bucket refilled 100 tokens in 1 s and was charged nothing by the reject.
  assert.equal(
    h.store.applyNow([{ key: 'tpm:llm:l:a', limit: a.llm![0]!.minute.limit, cost: 0, shadow: false }], T0 / 1000 + 1)[0]!.value,
    5100,
  )
})
