/**
 * A key-less LLM client (the AI SDK's OpenAI-compatible provider with no API key, as in front of
 * a local vLLM) through the real gateway with the shipped policies/llm-openai.json: its calls are
 * keyed on its client address and limited like a key's, never passed unlimited.
 */
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { startApiLlm, type ApiLlm } from '../helpers/api-llm.js'
import { callClient } from '../helpers/llm-clients.js'
import { startGateway, type GatewayProcess } from '../helpers/processes.js'

const NO_USAGE = JSON.stringify({
  id: 'chatcmpl-1',
  object: 'chat.completion',
  created: 1,
  model: 'm',
  choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }],
})

let upstream: ApiLlm
let gw: GatewayProcess

describe('a client without an API key', { timeout: 60_000 }, () => {
  before(async () => {
    upstream = await startApiLlm((r) =>
      // No usage in the answer: each call keeps its reservation, as an upstream that reports none.
      r.body?.max_tokens === 4096 ? { body: NO_USAGE } : undefined,
    )
    gw = await startGateway({
      FAIRVISOR_BACKEND_URL: upstream.url,
      FAIRVISOR_CONFIG_FILE: 'policies/llm-openai.json',
      FAIRVISOR_STORE: 'memory',
      FAIRVISOR_LOG_LEVEL: 'debug',
    })
  })

  after(async () => {
    const code = await gw?.stop()
    await upstream?.close()
    assert.equal(code, 0)
  })

  test('is keyed on its address by the shipped OpenAI bundle: 30,000 tokens a minute pass seven 4,096-token calls, then a 429', async () => {
    const statuses: (number | 'ok')[] = []
    for (let i = 0; i < 8; i++) {
      try {
        await callClient('ai-compatible', { root: gw.url, maxTokens: 4096, maxRetries: 0 })
        statuses.push('ok')
      } catch (err) {
        statuses.push((err as { statusCode: number }).statusCode)
      }
    }
    assert.deepEqual(statuses, ['ok', 'ok', 'ok', 'ok', 'ok', 'ok', 'ok', 429])
    assert.equal(upstream.seen.at(-1)!.headers.authorization, undefined, 'the client sent no key')
    const line = await gw.waitForLog((l) => l.msg === 'decision' && l.reason === 'tpm_exceeded')
    assert.equal(String(line.key), 'tpm:llm:openai_tokens_per_key:keyless,127.0.0.1')
  })
})
