/**
 * A cut legacy completions stream (/v1/completions) ends as the API ends one cut at max_tokens:
 * a text_completion chunk per choice with finish_reason "length", the usage chunk, [DONE].
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { apiOfPath, closingEvents } from '../../../../src/llm/dialects/index.js'
import { SseMeter } from '../../../../src/llm/sse-meter.js'

const limit = { maxCompletion: 1000, bufferTokens: 10, enforce: true, wouldTruncate: (): void => undefined }

test("by path or by the chunks' object, legacy completions end with text_completion chunks", () => {
  assert.equal(apiOfPath('/v1/completions'), 'completions')
  assert.equal(apiOfPath('/v1/chat/completions'), 'chat')
  for (const path of ['/v1/completions', '/somewhere']) {
    const m = new SseMeter([limit], path)
    m.feed(
      Buffer.from(
        'data: {"id":"cmpl-7","object":"text_completion","created":9,"model":"gpt-3.5-turbo-instruct","choices":[{"text":"Hi","index":0,"logprobs":null,"finish_reason":null}]}\n\n',
      ),
    )
    const events = String(closingEvents(m.facts, 'graceful_close', 5, { prompt: 3, completion: 5 })).split('\n\n')
    assert.deepEqual(JSON.parse(events[0]!.slice(6)), {
      id: 'cmpl-7',
      object: 'text_completion',
      created: 9,
      model: 'gpt-3.5-turbo-instruct',
      choices: [{ text: '', index: 0, logprobs: null, finish_reason: 'length' }],
    })
    assert.deepEqual(JSON.parse(events[1]!.slice(6)).usage, { prompt_tokens: 3, completion_tokens: 5, total_tokens: 8 })
    assert.equal(events[2], 'data: [DONE]')
    assert.match(
      String(closingEvents(m.facts, 'error_chunk', 5, undefined)),
      /^data: \{"error":\{"message":"max completion tokens exceeded"/,
    )
  }
})
