/**
 * The events a cut stream ends with, per API (src/llm/dialects): chosen by
 * the request path, else by the events' shapes (a gateway mounted under an
 * unknown path), and the ids and open block they repeat.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { SseMeter } from '../../../../src/llm/sse-meter.js'
import { apiOfPath, closingEvents, rejectBody } from '../../../../src/llm/dialects/index.js'

const limit = { maxCompletion: 1000, bufferTokens: 10, enforce: true, wouldTruncate: (): void => undefined }

test('the API is named by the path (Azure deployments and query strings too)', () => {
  assert.equal(apiOfPath('/openai/deployments/gpt4o/chat/completions?api-version=2024-10-21'), 'chat')
  assert.equal(apiOfPath('/v1/responses'), 'responses')
  assert.equal(apiOfPath('/anthropic/v1/messages'), 'messages')
  assert.equal(apiOfPath('/generate'), undefined)
  assert.deepEqual(JSON.parse(rejectBody('/v1/messages?beta=true', 'm')), {
    type: 'error',
    error: { type: 'rate_limit_error', message: 'm' },
  })
  assert.equal((JSON.parse(rejectBody('/v1/chat/completions', 'm')) as { error: { code: string } }).error.code, 'rate_limit_exceeded')
})

test('under an unknown path the events decide: Anthropic events get an Anthropic close for the open block', () => {
  const m = new SseMeter([limit], '/generate')
  m.feed(
    Buffer.from(
      'event: message_start\ndata: {"type":"message_start","message":{"usage":{"input_tokens":3,"output_tokens":1}}}\n\nevent: content_block_start\ndata: {"type":"content_block_start","index":2,"content_block":{"type":"text","text":""}}\n\n',
    ),
  )
  const out = closingEvents(m.facts, 'graceful_close', 7, undefined)
  assert.equal(
    out,
    'event: content_block_stop\ndata: {"type":"content_block_stop","index":2}\n\n' +
      'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{"output_tokens":7}}\n\n' +
      'event: message_stop\ndata: {"type":"message_stop"}\n\n',
  )
  assert.match(
    String(closingEvents(m.facts, 'error_chunk', 7, undefined)),
    /^event: error\ndata: \{"type":"error","error":\{"type":"rate_limit_error"/,
  )
})

test('Chat Completions: every choice seen ends with "length"; Responses: the next sequence_number and the output so far', () => {
  const c = new SseMeter([limit], '/x')
  c.feed(
    Buffer.from(
      'data: {"id":"c9","object":"chat.completion.chunk","created":5,"model":"m","choices":[{"index":0,"delta":{"content":"a"}},{"index":1,"delta":{"content":"b"}}]}\n\n',
    ),
  )
  const first = JSON.parse(
    String(closingEvents(c.facts, 'graceful_close', 1, undefined))
      .split('\n\n')[0]!
      .slice(6),
  ) as {
    id: string
    created: number
    choices: { index: number; finish_reason: string }[]
  }
  assert.deepEqual(
    [first.id, first.created, first.choices.map((x) => [x.index, x.finish_reason])],
    [
      'c9',
      5,
      [
        [0, 'length'],
        [1, 'length'],
      ],
    ],
  )
  const r = new SseMeter([limit], '/v1/responses')
  r.feed(
    Buffer.from(
      [
        'event: response.created\ndata: {"type":"response.created","sequence_number":0,"response":{"id":"r1","status":"in_progress","output":[]}}\n\n',
        'event: response.output_item.added\ndata: {"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"type":"message","status":"in_progress","content":[]}}\n\n',
        'event: response.content_part.added\ndata: {"type":"response.content_part.added","sequence_number":2,"output_index":0,"content_index":0,"part":{"type":"output_text","text":""}}\n\n',
        'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","sequence_number":3,"output_index":0,"content_index":0,"delta":"Hi"}\n\n',
      ].join(''),
    ),
  )
  const ev = String(closingEvents(r.facts, 'graceful_close', 1, { prompt: 4, completion: 1 }))
  assert.match(ev, /^event: response.incomplete\n/)
  const data = JSON.parse(ev.split('\n')[1]!.slice(6)) as {
    sequence_number: number
    response: {
      id: string
      status: string
      incomplete_details: { reason: string }
      output: { status: string; content: { text: string }[] }[]
      usage: { total_tokens: number }
    }
  }
  assert.equal(data.sequence_number, 4)
  assert.deepEqual(
    [data.response.id, data.response.status, data.response.incomplete_details.reason],
    ['r1', 'incomplete', 'max_output_tokens'],
  )
  assert.deepEqual([data.response.output[0]!.status, data.response.output[0]!.content[0]!.text], ['incomplete', 'Hi'])
  assert.equal(data.response.usage.total_tokens, 5)
})
