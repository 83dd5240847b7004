/**
 * The SSE meter's framing and bound (src/llm/sse-events.ts, sse-meter.ts,
 * exchange.ts): events end at an empty line whatever the line ends (CRLF,
 * LF, CR) and wherever the chunks split; events pass on whole; an event or a
 * line past the bound ends the stream before it, with the API's error event,
 * holding no more than the bound meanwhile. A cut inside a tool call waits
 * for the call to end, within its grace, else ends with the error event.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { LlmReservation } from '../../../src/engine/decision.js'
import { normaliseLlm } from '../../../src/algorithms/llm.js'
import { LlmExchange, type BrokenStream, type Settlement } from '../../../src/llm/exchange.js'
import { EventEnds } from '../../../src/llm/sse-events.js'
import { eventMessage } from '../../../src/llm/framings/eventstream.js'
import { streamFraming } from '../../../src/llm/framings/index.js'
import { SseMeter } from '../../../src/llm/sse-meter.js'
import type { Store } from '../../../src/store/store.js'
import { chatToolStream, messagesToolStream, responsesToolStream, toolArgs } from '../../helpers/tool-streams.js'

const limit = { maxCompletion: 1_000_000, bufferTokens: 10, enforce: true, wouldTruncate: (): void => undefined }
const chat = (text: string, nl = '\n'): string => `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: text } }] })}${nl}${nl}`

/** Event ends found feeding `text` in pieces of `size` bytes, as offsets in the whole. */
function ends(text: string, size: number): number[] {
  const e = new EventEnds()
  const b = Buffer.from(text)
  const out: number[] = []
  for (let i = 0; i < b.length; i += size) for (const at of e.in(b.subarray(i, i + size))) out.push(i + at)
  return out
}

test('events end at an empty line after CRLF, LF or CR, however the chunks split', () => {
  const lf = 'event: a\ndata: 1\n\n'
  const crlf = 'data: 2\r\n\r\n'
  const cr = ': c\rdata: 3\r\r'
  const mixed = 'data: 4\r\n\n'
  const text = `${lf}${crlf}${cr}${mixed}data: 5\n\r`
  const want = [lf.length, lf.length + crlf.length, lf.length + crlf.length + cr.length, text.length - 'data: 5\n\r'.length]
  for (let size = 1; size <= text.length; size++) {
    const got = ends(`${text}x`, size) // the last CR is decided by the byte after it
    assert.deepEqual(got, [...want, text.length], `pieces of ${size}`)
  }
  // A CR ending the last chunk: that event's end is known only when the next byte comes.
  assert.deepEqual(ends('data: 1\r\r', 100), [])
})

test('a meter passes events whole, in any split, and counts them; an unfinished last event is handed back at the end', () => {
  const stream = chat('a'.repeat(40)) + chat('b'.repeat(40), '\r\n') + chat('c'.repeat(40), '\r')
  for (let size = 1; size <= 64; size++) {
    const m = new SseMeter([limit], '/v1/chat/completions')
    const passed: Buffer[] = []
    const b = Buffer.from(stream)
    for (let i = 0; i < b.length; i += size) {
      const out = m.feed(b.subarray(i, i + size))
      if (out !== undefined) passed.push(out)
    }
    // The last event ends with a CR that only the next byte can confirm: it comes with rest().
    assert.equal(Buffer.concat(passed).toString(), chat('a'.repeat(40)) + chat('b'.repeat(40), '\r\n'), `pieces of ${size}`)
    assert.equal(m.counted, 20)
    assert.equal(m.rest()?.toString(), chat('c'.repeat(40), '\r'))
    assert.equal(m.rest(), undefined)
  }
})

test('an event or a line past the bound ends the stream before it; an event of exactly the bound passes', () => {
  const max = 1024
  const exact = `data: ${'x'.repeat(max - 8)}\n\n`
  assert.equal(exact.length, max)
  const m = new SseMeter([limit], '/v1/chat/completions', max)
  assert.deepEqual(m.feed(Buffer.from(exact + chat('hi'))), Buffer.from(exact + chat('hi')))
  assert.equal(m.ended, undefined)
  // A line without its end: the events before it pass, then the stream ends once the line passes the bound.
  let out = m.feed(Buffer.from(`${chat('ok')}data: ${'y'.repeat(600)}`))
  assert.equal(out?.toString(), chat('ok'))
  assert.equal(m.ended, undefined)
  out = m.feed(Buffer.from('y'.repeat(600)))
  assert.equal(out, undefined)
  assert.equal(m.ended, 'event_too_large')
  assert.equal(m.feed(Buffer.from('\n\n')), undefined)
  assert.equal(m.rest(), undefined)
  // An event of many short lines counts whole.
  const lines = new SseMeter([limit], '', max)
  assert.equal(lines.feed(Buffer.from('data: z\n'.repeat(200))), undefined)
  assert.equal(lines.ended, 'event_too_large')
})

function reservation(): LlmReservation {
  const config = normaliseLlm({ tokens_per_minute: 60, burst_tokens: 1000, max_completion_tokens: 100, streaming: { buffer_tokens: 10 } })
  return {
    policyId: 'p',
    ruleName: 'r',
    shadow: false,
    streaming: true,
    prompt: 5,
    reserved: 105,
    choices: 1,
    minute: { key: 'k', limit: config },
    day: undefined,
    config,
  }
}

function exchange(broken: BrokenStream[], settled: Settlement[][], max: number): LlmExchange {
  const store = { adjust: (_a: unknown, _n: number, cb: (err?: Error) => void) => cb() } as unknown as Store
  return new LlmExchange(
    [reservation()],
    {
      store,
      now: () => 0,
      settled: (s) => settled.push(s),
      dropped: () => undefined,
      wouldTruncate: () => undefined,
      truncated: () => undefined,
      broken: (b) => broken.push(b),
    },
    max,
  )
}

test("an event past the bound ends the stream with the API's own error event, settled on what was streamed", () => {
  const huge = Buffer.from(`data: ${'q'.repeat(2000)}`)
  const cases: [string, string, RegExp][] = [
    [
      '/v1/chat/completions',
      chat('abcd'),
      /^data: \{"error":\{"message":"[^"]*larger than 1024 bytes[^"]*","type":"server_error","param":null,"code":"upstream_event_too_large"\}\}\n\n$/,
    ],
    [
      '/v1/responses',
      'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","sequence_number":7,"output_index":0,"content_index":0,"delta":"abcd"}\n\n',
      /^event: error\ndata: \{"type":"error","code":"upstream_event_too_large","message":"[^"]*","param":null,"sequence_number":8,"error":\{"type":"server_error"/,
    ],
    [
      '/v1/messages',
      'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"abcd"}}\n\n',
      /^event: error\ndata: \{"type":"error","error":\{"type":"api_error","message":"[^"]*larger than 1024 bytes/,
    ],
  ]
  for (const [path, first, error] of cases) {
    const broken: BrokenStream[] = []
    const settled: Settlement[][] = []
    const x = exchange(broken, settled, 1024)
    x.headers(200, 'text/event-stream', undefined, path)
    assert.equal(x.data(Buffer.from(first))?.toString(), first)
    assert.equal(x.data(huge), undefined)
    assert.equal(x.ending, 'event_too_large')
    assert.match(x.closing().toString(), error, path)
    assert.equal(broken.length, 1)
    assert.equal(broken[0]!.maxEventBytes, 1024)
    assert.deepEqual(
      settled.flat().map((s) => [s.by, s.used]),
      [['counted', 6]],
      path,
    )
  }
})

test("a stream reader that throws ends that stream (the API's error event), never the process", () => {
  const broken: BrokenStream[] = []
  const x = exchange(broken, [], 1024 * 1024)
  x.headers(200, 'text/event-stream', undefined, '/v1/chat/completions')
  // Standing in for any bug the reader may have: its error must stay with this stream.
  ;(x as unknown as { meter: { feed(): never } }).meter.feed = () => {
    throw new RangeError('Invalid string length')
  }
  assert.equal(x.data(Buffer.from(chat('a'))), undefined)
  assert.equal(x.ending, 'unreadable')
  assert.match(x.closing().toString(), /"code":"upstream_stream_unreadable"/)
  assert.equal(broken[0]!.err?.message, 'Invalid string length')
})

test('counted: legacy completions text, audio transcripts and audio data, CJK by its script, or by the rule’s tokenizer', () => {
  const count = (events: object[], count?: (t: string) => number): number => {
    const m = new SseMeter([limit], '', undefined, undefined, { count })
    m.feed(Buffer.from(events.map((e) => `data: ${JSON.stringify(e)}\n\n`).join('')))
    return m.counted
  }
  assert.equal(count([{ object: 'text_completion', choices: [{ index: 0, text: 'abcdefgh' }] }]), 2)
  // A second of 24 kHz 16-bit audio is 64,000 base64 characters: 20 tokens; its transcript counts as text.
  assert.equal(count([{ choices: [{ index: 0, delta: { audio: { data: 'A'.repeat(64_000), transcript: 'abcd' } } }] }]), 21)
  assert.equal(count([{ type: 'response.output_audio.delta', delta: 'A'.repeat(32_000) }]), 10)
  assert.equal(count([{ type: 'response.output_audio_transcript.delta', delta: 'abcdabcd' }]), 2)
  assert.equal(count([{ type: 'speech.audio.delta', audio: 'A'.repeat(3200) }]), 1)
  assert.equal(count([{ choices: [{ index: 0, delta: { content: '速率限制让每个租户' } }] }]), 9, 'not 9 / 4')
  assert.equal(
    count([{ choices: [{ index: 0, delta: { content: 'abcdefgh' } }] }], () => 5),
    5,
  )
})

test('usage is final once an event other than message_start brings it; the usage chunk a client did not ask for is kept from it', () => {
  const usage = '{"id":"c","choices":[],"usage":{"prompt_tokens":19,"completion_tokens":84,"total_tokens":103}}'
  const shown = new SseMeter([limit], '/v1/chat/completions', undefined, undefined, { hideUsage: true })
  const out = shown.feed(Buffer.from(`${chat('abcd')}data: ${usage}\n\ndata: [DONE]\n\n`))!.toString()
  assert.equal(out, `${chat('abcd')}data: [DONE]\n\n`)
  assert.deepEqual([shown.usage.prompt, shown.usage.completion, shown.usageFinal], [19, 84, true])
  const asked = new SseMeter([limit], '/v1/chat/completions')
  assert.match(asked.feed(Buffer.from(`data: ${usage}\n\n`))!.toString(), /"usage"/)
  const anthropic = new SseMeter([limit], '/v1/messages')
  anthropic.feed(
    Buffer.from('event: message_start\ndata: {"type":"message_start","message":{"usage":{"input_tokens":25,"output_tokens":1}}}\n\n'),
  )
  assert.equal(anthropic.usageFinal, false, 'a placeholder')
  anthropic.feed(Buffer.from('event: message_delta\ndata: {"type":"message_delta","usage":{"output_tokens":40}}\n\n'))
  assert.equal(anthropic.usageFinal, true)
  const groq = new SseMeter([limit], '/openai/v1/chat/completions')
  groq.feed(
    Buffer.from(
      'data: {"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"x_groq":{"id":"req_1","usage":{"prompt_tokens":12,"completion_tokens":30,"total_tokens":42}}}\n\n',
    ),
  )
  assert.deepEqual([groq.usage.prompt, groq.usage.completion, groq.usageFinal], [12, 30, true])
})

test('a client that leaves after the final usage arrived is settled on that usage; before it, on the count', () => {
  const leave = (events: string): Settlement[] => {
    const settled: Settlement[][] = []
    const x = exchange([], settled, 1 << 20)
    x.headers(200, 'text/event-stream', undefined, '/v1/chat/completions')
    x.data(Buffer.from(events))
    x.end(false)
    return settled.flat()
  }
  const text = chat('x'.repeat(400))
  const usage = 'data: {"id":"c","choices":[],"usage":{"prompt_tokens":19,"completion_tokens":84,"total_tokens":103}}\n\n'
  assert.deepEqual(
    leave(`${text}${usage}data: [DONE]\n\n`).map((s) => [s.by, s.used]),
    [['usage', 103]],
  )
  assert.deepEqual(
    leave(text).map((s) => [s.by, s.used]),
    [['counted', 5 + 100]],
  )
})

/** A cut of `sse` at 20 tokens (steps of 10) through an exchange on `path`: what the client got, the hooks' reports. */
function toolCut(path: string, sse: string, grace: number, action = 'graceful_close') {
  const config = normaliseLlm({
    tokens_per_minute: 60,
    burst_tokens: 100_000,
    max_completion_tokens: 20,
    streaming: { buffer_tokens: 10, on_limit_exceeded: action },
  })
  const r = { ...reservation(), config, minute: { key: 'k', limit: config } }
  const cuts: { counted: number; toolCall?: { grace: number; closed: boolean } }[] = []
  const settled: Settlement[][] = []
  const store = { adjust: (_a: unknown, _n: number, cb: (err?: Error) => void) => cb() } as unknown as Store
  const hooks = {
    store,
    now: () => 0,
    settled: (x: Settlement[]) => settled.push(x),
    dropped: () => undefined,
    wouldTruncate: () => undefined,
    truncated: (_r: LlmReservation, counted: number, toolCall?: { grace: number; closed: boolean }) => cuts.push({ counted, toolCall }),
  }
  const x = new LlmExchange([r], hooks, 1024 * 1024, [], grace)
  x.headers(200, 'text/event-stream', undefined, path)
  let out = ''
  for (const e of sse.split(/(?<=\n\n)/)) {
    const b = x.data(Buffer.from(e))
    if (b) out += b.toString()
    if (x.ending !== undefined) {
      out += x.closing().toString()
      break
    }
  }
  return { out, cut: cuts[0], used: settled[0]?.[0]?.used }
}

test('a limit passed inside a tool call waits for the call to end, its tokens charged; past the grace, the error event', () => {
  const short = toolArgs(400) // 100 tokens of arguments
  for (const [path, sse, last] of [
    ['/v1/chat/completions', chatToolStream(short), /"arguments":"[^"]*\\"\}"\}\}\]/],
    ['/v1/messages', messagesToolStream(short), /event: content_block_stop\ndata: \{"type":"content_block_stop","index":1\}/],
    ['/v1/responses', responsesToolStream(short), /event: response\.output_item\.done/],
  ] as const) {
    const waited = toolCut(path, sse, 1024)
    assert.equal(waited.cut?.toolCall?.closed, true, path)
    assert.ok(waited.cut!.counted >= 100, `${path}: every argument token counted (${waited.cut!.counted})`)
    const passedAt = waited.cut!.counted - waited.cut!.toolCall!.grace // the count that passed the limit, in the call
    assert.ok(passedAt > 20 && passedAt < 40, `${path}: passed at ${passedAt}`)
    assert.equal(waited.used, 5 + waited.cut!.counted + (path === '/v1/messages' ? 64 - 5 : 0), `${path}: settled on the count`)
    assert.match(waited.out, last, path)
    assert.doesNotMatch(waited.out, /"error":\{|event: error/, path)
    // The whole call, then the API's graceful close.
    assert.match(waited.out, /finish_reason":"length"|"stop_reason":"max_tokens"|response\.incomplete/, path)

    const over = toolCut(path, sse, 30)
    assert.equal(over.cut?.toolCall?.closed, false, path)
    assert.ok(over.cut!.toolCall!.grace >= 30, path)
    assert.match(over.out, /max completion tokens exceeded inside a tool call/, path)
    assert.match(over.out, /(^|\n)(event: error\n)?data: \{"(type":"error|error)"[^\n]*\n\n$/, `${path}: ends with the error event`)
    assert.equal(over.used, 5 + over.cut!.counted + (path === '/v1/messages' ? 64 - 5 : 0), path)

    // Grace 0: no wait, the error event at once; error_chunk: no wait, its own error event.
    assert.equal(toolCut(path, sse, 0).cut?.toolCall?.grace, 0, path)
    assert.match(toolCut(path, sse, 0).out, /inside a tool call/, path)
    const err = toolCut(path, sse, 1024, 'error_chunk')
    assert.equal(err.cut?.toolCall, undefined, path)
    assert.equal(err.cut?.counted, passedAt, `${path}: cut where the limit was passed`)
    assert.match(err.out, /"message":"max completion tokens exceeded"/, path)
  }
})

test('a limit passed outside a tool call cuts where it always did', () => {
  const meter = new SseMeter([{ ...limit, maxCompletion: 5 }], '/v1/chat/completions', 1024, undefined, { toolCallGrace: 1024 })
  assert.ok(meter.feed(Buffer.from(chat('a'.repeat(80)))))
  assert.equal(meter.ended, 'max_completion_tokens')
  assert.equal(meter.graceUsed, 0)
})

test('counted by script in the native streams too: Gemini SSE and JSON array, Ollama NDJSON, Bedrock event stream', () => {
  const cjk = '速率限制让每个租户' // 9 characters: 9 tokens, not 9 / 4
  const counted = (path: string, type: string, body: Buffer | string): number => {
    const m = new SseMeter([limit], path, undefined, streamFraming(200, type, path))
    m.feed(Buffer.from(body))
    return m.counted
  }
  const gemini = { candidates: [{ content: { parts: [{ text: cjk }], role: 'model' }, index: 0 }] }
  assert.equal(counted('/v1beta/models/m:streamGenerateContent?alt=sse', 'text/event-stream', `data: ${JSON.stringify(gemini)}\r\n\r\n`), 9)
  assert.equal(counted('/v1beta/models/m:streamGenerateContent', 'application/json', `[${JSON.stringify(gemini)}\n]`), 9)
  const ollama = { model: 'llama3', created_at: '2026-01-01T00:00:00Z', message: { role: 'assistant', content: cjk }, done: false }
  assert.equal(counted('/api/chat', 'application/x-ndjson', `${JSON.stringify(ollama)}\n`), 9)
  const delta = eventMessage('contentBlockDelta', { contentBlockIndex: 0, delta: { text: cjk } })
  assert.equal(counted('/model/m/converse-stream', 'application/vnd.amazon.eventstream', delta), 9)
})
