/**
 * What the closing events of Gemini, Bedrock and Ollama streams repeat (src/llm/dialects/
 * provider-facts.ts) and the events themselves (gemini.ts, bedrock.ts, ollama.ts): each
 * written in the framing of its stream, with the ids, block and shape the stream had; the
 * error events for a cut and for a broken stream; and reject bodies in each API's shape.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { EventStreamCodec } from '@smithy/core/event-streams'
import { closingEvents, rejectBody, upstreamErrorEvent } from '../../../../src/llm/dialects/index.js'
import { eventMessage, EventStreamFraming } from '../../../../src/llm/framings/eventstream.js'
import { JsonArrayFraming } from '../../../../src/llm/framings/json-array.js'
import { NdjsonFraming } from '../../../../src/llm/framings/ndjson.js'
import { SseMeter } from '../../../../src/llm/sse-meter.js'

const limit = { maxCompletion: 1000, bufferTokens: 10, enforce: true, wouldTruncate: (): void => undefined }
const codec = new EventStreamCodec(
  (b) => Buffer.from(b).toString('utf8'),
  (s) => Buffer.from(s),
)

/** The event-stream messages in `b`: each one's type (event or exception) and payload. */
function messages(b: Buffer): [string, unknown][] {
  const out: [string, unknown][] = []
  for (let at = 0; at < b.length; ) {
    const len = b.readUInt32BE(at)
    const m = codec.decode(b.subarray(at, at + len))
    const type = m.headers[':event-type'] ?? m.headers[':exception-type']
    out.push([String(type?.value), JSON.parse(Buffer.from(m.body).toString())])
    at += len
  }
  return out
}

const geminiChunk = (index: number, text: string): object => ({
  candidates: [{ content: { parts: [{ text }], role: 'model' }, index }],
  usageMetadata: { promptTokenCount: 4, totalTokenCount: 4 },
  modelVersion: 'gemini-2.5-flash',
  responseId: 'r1',
})

test('Gemini SSE: a MAX_TOKENS chunk for every candidate seen, with the stream ids and the usage; errors bare, as Google sends them', () => {
  const m = new SseMeter([limit], '/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse')
  m.feed(Buffer.from(`data: ${JSON.stringify(geminiChunk(0, 'a'))}\r\n\r\ndata: ${JSON.stringify(geminiChunk(1, 'b'))}\r\n\r\n`))
  const out = String(closingEvents(m.facts, 'graceful_close', 9, { prompt: 4, completion: 9 }))
  assert.ok(out.startsWith('data: ') && out.endsWith('\r\n\r\n'))
  assert.deepEqual(JSON.parse(out.slice(6)), {
    candidates: [0, 1].map((index) => ({ content: { parts: [{ text: '' }], role: 'model' }, finishReason: 'MAX_TOKENS', index })),
    usageMetadata: { promptTokenCount: 4, candidatesTokenCount: 9, totalTokenCount: 13 },
    modelVersion: 'gemini-2.5-flash',
    responseId: 'r1',
  })
  assert.deepEqual(JSON.parse(String(closingEvents(m.facts, 'error_chunk', 9, undefined))), {
    error: { code: 429, message: 'max completion tokens exceeded', status: 'RESOURCE_EXHAUSTED' },
  })
  assert.deepEqual(JSON.parse(String(upstreamErrorEvent(m.facts, 'broken', 'upstream_stream_unreadable'))).error, {
    code: 500,
    message: 'broken',
    status: 'INTERNAL',
  })
})

test('Gemini JSON array: the close is the last element and the end of the array', () => {
  const m = new SseMeter([limit], '/v1beta/models/m:streamGenerateContent', undefined, new JsonArrayFraming())
  const first = `[${JSON.stringify(geminiChunk(0, 'a'), null, 2)}`
  const passed = m.feed(Buffer.from(`${first}\n,\r\n{"candidates"`))
  assert.equal(passed?.toString(), first)
  const list = JSON.parse(first + String(closingEvents(m.facts, 'graceful_close', 1, undefined))) as {
    candidates: { finishReason?: string }[]
  }[]
  assert.equal(list.length, 2)
  assert.equal(list[1]!.candidates[0]!.finishReason, 'MAX_TOKENS')
  assert.equal((JSON.parse(first + String(closingEvents(m.facts, 'error_chunk', 1, undefined))) as object[]).length, 2)
})

test('Bedrock Converse: the open block stopped, messageStop max_tokens, metadata with the usage; without it, no metadata', () => {
  const m = new SseMeter([limit], '/model/m/converse-stream', undefined, new EventStreamFraming())
  m.feed(
    Buffer.concat([
      eventMessage('messageStart', { role: 'assistant' }),
      eventMessage('contentBlockDelta', { contentBlockIndex: 0, delta: { text: 'a' } }),
      eventMessage('contentBlockStop', { contentBlockIndex: 0 }),
      eventMessage('contentBlockStart', { contentBlockIndex: 1, start: { toolUse: { toolUseId: 't', name: 'f' } } }),
      eventMessage('contentBlockDelta', { contentBlockIndex: 1, delta: { toolUse: { input: '{"a"' } } }),
    ]),
  )
  assert.equal(m.facts.provider.block, 1)
  assert.deepEqual(messages(closingEvents(m.facts, 'graceful_close', 2, { prompt: 5, completion: 2 }) as Buffer), [
    ['contentBlockStop', { contentBlockIndex: 1 }],
    ['messageStop', { stopReason: 'max_tokens' }],
    ['metadata', { usage: { inputTokens: 5, outputTokens: 2, totalTokens: 7 }, metrics: { latencyMs: 0 } }],
  ])
  assert.deepEqual(messages(closingEvents(m.facts, 'graceful_close', 2, undefined) as Buffer), [
    ['messageStop', { stopReason: 'max_tokens' }],
  ])
  assert.deepEqual(messages(closingEvents(m.facts, 'error_chunk', 2, undefined) as Buffer), [
    ['throttlingException', { message: 'max completion tokens exceeded' }],
  ])
  assert.deepEqual(messages(upstreamErrorEvent(m.facts, 'broken', 'upstream_stream_unreadable') as Buffer), [
    ['internalServerException', { message: 'broken' }],
  ])
})

test('Bedrock InvokeModel: its events are the model own, so a cut ends with a modelStreamErrorException', () => {
  const m = new SseMeter([limit], '/model/m/invoke-with-response-stream', undefined, new EventStreamFraming())
  assert.deepEqual(messages(closingEvents(m.facts, 'graceful_close', 2, { prompt: 5, completion: 2 }) as Buffer), [
    [
      'modelStreamErrorException',
      { message: 'max completion tokens exceeded', originalStatusCode: 429, originalMessage: 'max completion tokens exceeded' },
    ],
  ])
})

test('Ollama: a done line with done_reason "length", shaped as the chat or generate chunks were', () => {
  const chat = new SseMeter([limit], '/api/chat', undefined, new NdjsonFraming())
  chat.feed(
    Buffer.from('{"model":"llama3.2","created_at":"2026-01-01T00:00:00.1Z","message":{"role":"assistant","content":"Hi"},"done":false}\n'),
  )
  assert.deepEqual(JSON.parse(String(closingEvents(chat.facts, 'graceful_close', 1, { prompt: 3, completion: 1 }))), {
    model: 'llama3.2',
    created_at: '2026-01-01T00:00:00.1Z',
    message: { role: 'assistant', content: '' },
    done: true,
    done_reason: 'length',
    prompt_eval_count: 3,
    eval_count: 1,
  })
  // Under an unknown path the framing names the API.
  const gen = new SseMeter([limit], '/llm/run', undefined, new NdjsonFraming())
  gen.feed(Buffer.from('{"model":"m","created_at":"t","response":"Hi","done":false}\n'))
  const last = JSON.parse(String(closingEvents(gen.facts, 'graceful_close', 1, undefined))) as Record<string, unknown>
  assert.deepEqual([last.response, last.message, last.done_reason, last.eval_count], ['', undefined, 'length', undefined])
  assert.equal(String(closingEvents(gen.facts, 'error_chunk', 1, undefined)), '{"error":"max completion tokens exceeded"}\n')
  assert.equal(String(upstreamErrorEvent(gen.facts, 'broken', 'x')), '{"error":"broken"}\n')
})

test('reject bodies in each API own shape', () => {
  assert.deepEqual(JSON.parse(rejectBody('/v1beta/models/m:generateContent?key=k', 'm')), {
    error: { code: 429, message: 'm', status: 'RESOURCE_EXHAUSTED' },
  })
  assert.deepEqual(JSON.parse(rejectBody('/v1beta/models/m:generateContent', 'm', true)), {
    error: { code: 400, message: 'm', status: 'INVALID_ARGUMENT' },
  })
  assert.deepEqual(JSON.parse(rejectBody('/model/m/converse', 'm')), { __type: 'ThrottlingException', message: 'm' })
  assert.deepEqual(JSON.parse(rejectBody('/model/m/converse', 'm', true)), { __type: 'ValidationException', message: 'm' })
  assert.deepEqual(JSON.parse(rejectBody('/api/chat', 'm')), { error: 'm' })
  // Past FAIRVISOR_LLM_MAX_RETRY_AFTER (a 403): a status the SDKs do not retry, and for Bedrock a type the AWS SDK does not either.
  assert.deepEqual(JSON.parse(rejectBody('/v1beta/models/m:streamGenerateContent', 'm', false, undefined, true)), {
    error: { code: 403, message: 'm', status: 'PERMISSION_DENIED' },
  })
  assert.deepEqual(JSON.parse(rejectBody('/model/m/converse', 'm', false, undefined, true)), {
    __type: 'ServiceQuotaExceededException',
    message: 'm',
  })
  assert.deepEqual(JSON.parse(rejectBody('/api/generate', 'm', true)), { error: 'm' })
})
