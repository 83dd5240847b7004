/**
 * stream_options.include_usage added to an OpenAI-compatible streaming request that has no
 * stream_options (docs/llm.md "Counting"): inserted after the opening brace, every other byte
 * kept; other paths, other bodies, a body not held whole, or one with stream_options of its own
 * are left alone.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { withStreamUsage } from '../../../src/llm/stream-usage.js'

const b = (s: string): Buffer => Buffer.from(s)

test('a streaming Chat Completions or completions request gets include_usage, its bytes otherwise as sent', () => {
  const body = ' {"model":"m","stream":true,"messages":[{"role":"user","content":"é \\u00e9"}]}'
  const out = withStreamUsage(b(body), true, '/v1/chat/completions')!.toString()
  assert.equal(
    out,
    ' {"stream_options":{"include_usage":true},"model":"m","stream":true,"messages":[{"role":"user","content":"é \\u00e9"}]}',
  )
  assert.deepEqual(JSON.parse(out).stream_options, { include_usage: true })
  for (const path of [
    '/v1/completions',
    '/openai/deployments/d/chat/completions?api-version=2024-10-21',
    '/v1beta/openai/chat/completions',
  ])
    assert.notEqual(withStreamUsage(b('{"stream":"true","prompt":"x"}'), true, path), undefined, path)
})

test('left alone: no stream, its own stream_options, another API, a body not held whole or not JSON', () => {
  const none = (body: string, whole = true, path = '/v1/chat/completions') =>
    assert.equal(withStreamUsage(b(body), whole, path), undefined, body)
  none('{"model":"m","messages":[]}')
  none('{"stream":false}')
  none('{"stream":true,"stream_options":{"include_usage":false}}')
  none('{"stream":true,"stream_options":{"include_obfuscation":false}}')
  none('{"stream":true}', false)
  none('{"stream":true}', true, '/v1/responses')
  none('{"stream":true}', true, '/v1/messages')
  none('{"stream":true', true)
  none('["stream"]')
})
