/**
 * Whether a stream is inside a tool call's arguments (src/llm/tool-blocks.ts), in each API's
 * recorded shapes (test/helpers/tool-streams.ts): open from the call's first event to the event
 * that ends its arguments, closed otherwise.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { JsonEnd, ToolBlocks } from '../../../src/llm/tool-blocks.js'
import { chatToolStream, messagesToolStream, responsesToolStream, toolArgs } from '../../helpers/tool-streams.js'

/** Whether the call is open after each event of `sse`. */
function openAfter(sse: string): boolean[] {
  const b = new ToolBlocks()
  const out: boolean[] = []
  for (const e of sse.split('\n\n')) {
    const data = /^data: (.*)$/m.exec(e)?.[1]
    if (data === undefined || data === '[DONE]') continue
    b.observe(/^event: (.*)$/m.exec(e)?.[1], JSON.parse(data) as Record<string, unknown>)
    out.push(b.open)
  }
  return out
}

/** [events before the call opens, events while open]; the rest closed. */
function shape(flags: boolean[]): [number, number] {
  const first = flags.indexOf(true)
  const last = flags.lastIndexOf(true)
  assert.ok(first >= 0, 'opens')
  assert.ok(flags.slice(first, last + 1).every(Boolean), 'one block')
  return [first, last - first + 1]
}

const args = toolArgs(200) // 13 deltas of 16 characters
const deltas = Math.ceil(args.length / 16)

test('Chat Completions: open from the call to the delta that ends its JSON', () => {
  // text, the call's first entry (no arguments yet), its deltas (the last closes it), finish, usage
  assert.deepEqual(shape(openAfter(chatToolStream(args))), [1, deltas])
})

test('Anthropic Messages: open from content_block_start of tool_use to its content_block_stop; text blocks never', () => {
  // message_start, text block (3), tool_use start + deltas, then its stop closes
  assert.deepEqual(shape(openAfter(messagesToolStream(args))), [4, 1 + deltas])
})

test('Responses API: open from the function_call item added to its output_item.done', () => {
  // created, in_progress, item added + deltas + arguments.done, item done closes
  assert.deepEqual(shape(openAfter(responsesToolStream(args))), [2, 1 + deltas + 1])
})

test('Chat Completions: arguments that never end close at the choice finish or the next call', () => {
  const b = new ToolBlocks()
  const chunk = (delta: object, finish: string | null = null) => ({ choices: [{ index: 0, delta, finish_reason: finish }] })
  b.observe(undefined, chunk({ tool_calls: [{ index: 0, id: 'a', function: { name: 'f', arguments: '{"x": "unterminated' } }] }))
  assert.equal(b.open, true)
  b.observe(undefined, chunk({ tool_calls: [{ index: 1, id: 'b', function: { name: 'g', arguments: '{}' } }] }))
  assert.equal(b.open, false, 'the next call, whole')
  b.observe(undefined, chunk({ tool_calls: [{ index: 2, id: 'c', function: { name: 'g', arguments: '[1,' } }] }))
  assert.equal(b.open, true)
  b.observe(undefined, chunk({}, 'tool_calls'))
  assert.equal(b.open, false)
  // Legacy function_call, and an empty delta after the call's end that does not open it again.
  b.observe(undefined, chunk({ function_call: { name: 'f', arguments: '{"a"' } }))
  assert.equal(b.open, true)
  b.observe(undefined, chunk({ function_call: { arguments: ':1}' } }))
  assert.equal(b.open, false)
  b.observe(undefined, chunk({ function_call: { arguments: '' } }))
  assert.equal(b.open, false)
})

test('Bedrock ConverseStream: toolUse blocks by contentBlockIndex', () => {
  const b = new ToolBlocks()
  b.observe('contentBlockStart', { contentBlockIndex: 1, start: { toolUse: { toolUseId: 't', name: 'f' } } })
  b.observe('contentBlockDelta', { contentBlockIndex: 1, delta: { toolUse: { input: '{"a":' } } })
  assert.equal(b.open, true)
  b.observe('contentBlockStop', { contentBlockIndex: 1 })
  assert.equal(b.open, false)
})

test('JsonEnd: whole once the outer value closes, braces in strings and escapes aside', () => {
  const j = new JsonEnd()
  for (const piece of ['{"a": "}\\"{', '", "b": [1, {"c": "]"}', ']', '}']) {
    assert.equal(j.whole, false)
    j.feed(piece)
  }
  assert.equal(j.whole, true)
  const s = new JsonEnd()
  s.feed('"just a string"')
  assert.equal(s.whole, false, 'not an object: only the structure closes it')
})
