/**
 * The stream framings that are not SSE (src/llm/framings/): which one a response takes
 * (Content-Type and path), where each frame ends however the chunks split (NDJSON lines,
 * Gemini's JSON array elements with braces and quotes in their strings, Bedrock event-stream
 * messages with their preludes split), what each frame reads as, and a message that fails
 * its checksum: the meter passes the frames before it and ends the stream unreadable.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { EventStreamCodec } from '@smithy/core/event-streams'
import { eventMessage, EventStreamFraming } from '../../../../src/llm/framings/eventstream.js'
import type { Framing } from '../../../../src/llm/framings/framing.js'
import { streamFraming } from '../../../../src/llm/framings/index.js'
import { JsonArrayFraming } from '../../../../src/llm/framings/json-array.js'
import { NdjsonFraming } from '../../../../src/llm/framings/ndjson.js'
import { SseMeter } from '../../../../src/llm/sse-meter.js'

const codec = new EventStreamCodec(
  (b) => Buffer.from(b).toString('utf8'),
  (s) => Buffer.from(s),
)
const limit = { maxCompletion: 1_000_000, bufferTokens: 10, enforce: true, wouldTruncate: (): void => undefined }

/** Frame ends found feeding `b` in pieces of `size` bytes, as offsets in the whole. */
function ends(f: Framing, b: Buffer, size: number): number[] {
  const out: number[] = []
  for (let i = 0; i < b.length; i += size) for (const at of f.frameEnds(b.subarray(i, i + size))) out.push(i + at)
  return out
}

function reads(f: Framing, frame: Buffer): [string | undefined, string][] {
  const out: [string | undefined, string][] = []
  f.read(frame, (n, d) => out.push([n, d]))
  return out
}

test('the framing follows the Content-Type, and the path for Gemini JSON streams', () => {
  assert.equal(streamFraming(200, 'application/vnd.amazon.eventstream', '/model/m/converse-stream')?.kind, 'eventstream')
  assert.equal(streamFraming(200, 'application/x-ndjson', '/api/chat')?.kind, 'ndjson')
  assert.equal(streamFraming(200, 'application/json; charset=UTF-8', '/v1beta/models/m:streamGenerateContent')?.kind, 'json-array')
  assert.equal(streamFraming(200, 'application/json', '/v1beta/models/m:generateContent'), undefined)
  assert.equal(streamFraming(200, 'text/event-stream', '/v1beta/models/m:streamGenerateContent?alt=sse'), undefined)
  assert.equal(streamFraming(200, undefined, '/api/chat'), undefined)
  // Gemini's error answer is one JSON object, kept as JSON (refunded as any error).
  assert.equal(streamFraming(400, 'application/json', '/v1beta/models/m:streamGenerateContent'), undefined)
})

test('NDJSON: a frame per line, in any split; blank lines read as nothing', () => {
  const text = '{"a":1}\n{"b":"x\\ny"}\r\n\n{"c":3}\n'
  const b = Buffer.from(text)
  for (let size = 1; size <= b.length; size++) assert.deepEqual(ends(new NdjsonFraming(), b, size), [8, 22, 23, 31], `pieces of ${size}`)
  assert.deepEqual(reads(new NdjsonFraming(), Buffer.from('{"b":2}\r\n')), [[undefined, '{"b":2}']])
  assert.deepEqual(reads(new NdjsonFraming(), Buffer.from('\n')), [])
})

test('JSON array: a frame per element, strings with braces, brackets and escapes skipped, in any split', () => {
  const els = [{ t: 'a "{"} [x] \\' }, { t: '}]', n: [1, [2, { x: '{' }]] }, { t: 'é ✓' }]
  const text = `[${JSON.stringify(els[0], null, 2)}\n,\r\n${JSON.stringify(els[1], null, 2)}\n,\r\n${JSON.stringify(els[2])}\n]`
  const b = Buffer.from(text)
  const whole = ends(new JsonArrayFraming(), b, b.length)
  assert.equal(whole.length, 3)
  for (let size = 1; size <= b.length; size++) assert.deepEqual(ends(new JsonArrayFraming(), b, size), whole, `pieces of ${size}`)
  // Each frame reads as its element; what is left at the end is the array's `]`.
  let at = 0
  whole.forEach((end, i) => {
    assert.deepEqual(JSON.parse(reads(new JsonArrayFraming(), b.subarray(at, end))[0]![1]), els[i])
    at = end
  })
  assert.equal(b.subarray(at).toString(), '\n]')
  // More closed than opened ends no frame.
  assert.deepEqual(new JsonArrayFraming().frameEnds(Buffer.from(']]}[{}')), [6])
})

test('event stream: a frame per message, preludes split anywhere; events read by type, InvokeModel chunks decoded, exceptions not', () => {
  const inner = JSON.stringify({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Hi' } })
  const messages = [
    eventMessage('messageStart', { role: 'assistant' }),
    eventMessage('contentBlockDelta', { contentBlockIndex: 0, delta: { text: 'x'.repeat(300) } }),
    eventMessage('chunk', { bytes: Buffer.from(inner).toString('base64') }),
    eventMessage('throttlingException', { message: 'slow down' }, true),
  ]
  const b = Buffer.concat(messages)
  const want = messages.map((_, i) => messages.slice(0, i + 1).reduce((n, m) => n + m.length, 0))
  for (let size = 1; size <= 40; size++) assert.deepEqual(ends(new EventStreamFraming(), b, size), want, `pieces of ${size}`)
  const f = new EventStreamFraming()
  assert.deepEqual(reads(f, messages[0]!), [['messageStart', '{"role":"assistant"}']])
  assert.deepEqual(reads(f, messages[2]!), [[undefined, inner]])
  assert.deepEqual(reads(f, messages[3]!), [])
  // What the gateway writes is what the AWS SDK's codec reads.
  const decoded = codec.decode(messages[3]!)
  assert.deepEqual(Object.fromEntries(Object.entries(decoded.headers).map(([k, v]) => [k, v.value])), {
    ':exception-type': 'throttlingException',
    ':content-type': 'application/json',
    ':message-type': 'exception',
  })
  // A length no message has ends a frame at once, which does not read.
  assert.deepEqual(new EventStreamFraming().frameEnds(Buffer.from([0, 0, 0, 5, 1, 2])), [4])
  assert.throws(() => reads(f, Buffer.from([0, 0, 0, 5])))
})

test('a meter with a framing: frames pass whole and are counted; one failing its checksum ends the stream after the ones before it', () => {
  const delta = (i: number): Buffer => eventMessage('contentBlockDelta', { contentBlockIndex: 0, delta: { text: String(i).repeat(40) } })
  const good = [eventMessage('messageStart', { role: 'assistant' }), delta(1), delta(2)]
  const bad = Buffer.from(delta(3))
  bad[bad.length - 1] = bad[bad.length - 1]! ^ 1
  const all = Buffer.concat([...good, bad, delta(4)])
  for (const size of [1, 7, 64, all.length]) {
    const m = new SseMeter([limit], '/model/m/converse-stream', undefined, new EventStreamFraming())
    const passed: Buffer[] = []
    for (let i = 0; i < all.length && m.ended === undefined; i += size) {
      const out = m.feed(all.subarray(i, i + size))
      if (out) passed.push(out)
    }
    assert.equal(m.ended, 'unreadable', `pieces of ${size}`)
    assert.match(String(m.failure), /checksum/)
    assert.ok(Buffer.concat(passed).equals(Buffer.concat(good)), `pieces of ${size}: the frames before it, whole`)
    assert.equal(m.counted, 20)
    assert.equal(m.facts.api, 'bedrock')
    assert.equal(m.facts.provider.block, 0)
  }
})
