/**
 * The shipped policies/llm-openai.json covers Azure OpenAI and Gemini's OpenAI-compatible API
 * (docs/llm.md "Fronting"), through the real gateway: the OpenAI SDK's AzureOpenAI client
 * (`/openai/deployments/{d}/chat/completions?api-version=`, its api-key header), the OpenAI SDK
 * on Azure's v1 API (`/openai/v1/…`) and on Gemini's (`/v1beta/openai/…`), and the AI SDK's
 * OpenAI-compatible provider on Gemini's: each call is limited per key (RateLimit-* headers) and
 * settles at the upstream's usage, streams included.
 */
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import OpenAI, { AzureOpenAI } from 'openai'
import { startApiLlm, type ApiLlm } from '../helpers/api-llm.js'
import { callClient } from '../helpers/llm-clients.js'
import { metricValue, startGateway, type GatewayProcess } from '../helpers/processes.js'

let upstream: ApiLlm
let gw: GatewayProcess

async function settled<T>(policy: string, call: () => Promise<T>): Promise<{ result: T; used: number }> {
  const read = async (): Promise<number> => (await metricValue(gw, 'fairvisor_tokens_consumed_total', `policy="${policy}"`)) ?? 0
  const before = await read()
  const result = await call()
  for (let deadline = Date.now() + 10_000; ; await new Promise((r) => setTimeout(r, 10))) {
    const now = await read()
    if (now !== before) return { result, used: now - before }
    assert.ok(Date.now() < deadline, `no settlement for ${policy}`)
  }
}

describe('the shipped OpenAI bundle on Azure and Gemini paths', { timeout: 60_000 }, () => {
  before(async () => {
    upstream = await startApiLlm()
    gw = await startGateway({
      FAIRVISOR_BACKEND_URL: upstream.url,
      FAIRVISOR_CONFIG_FILE: 'policies/llm-openai.json',
      FAIRVISOR_STORE: 'memory',
    })
  })

  after(async () => {
    const code = await gw?.stop()
    await upstream?.close()
    assert.equal(code, 0)
  })

  test('Azure OpenAI: a deployment with api-version, and the v1 API', async () => {
    const azure = new AzureOpenAI({
      apiKey: 'azure-key-1',
      endpoint: gw.url,
      apiVersion: '2024-10-21',
      deployment: 'gpt-4o-mini',
      maxRetries: 0,
    })
    const plain = await settled('azure_openai', () =>
      azure.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }], max_tokens: 100 }).withResponse(),
    )
    assert.match(upstream.seen.at(-1)!.path, /^\/openai\/deployments\/gpt-4o-mini\/chat\/completions\?api-version=2024-10-21$/)
    assert.equal(upstream.seen.at(-1)!.headers['api-key'], 'azure-key-1')
    assert.equal(plain.result.response.headers.get('ratelimit-limit'), '30000')
    assert.equal(plain.used, 28)
    const stream = await settled('azure_openai', () =>
      azure.chat.completions.stream({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }).finalChatCompletion(),
    )
    assert.equal(stream.used, 200, 'asked for its usage')
    const v1 = new OpenAI({ apiKey: 'azure-key-1', baseURL: `${gw.url}/openai/v1`, maxRetries: 0 })
    const r = await settled('azure_openai', () => v1.responses.create({ model: 'gpt-4.1', input: 'hi' }))
    assert.equal(r.used, 49)
  })

  test("Gemini's OpenAI-compatible API, with the OpenAI SDK and the AI SDK's OpenAI-compatible provider", async () => {
    const gemini = new OpenAI({ apiKey: 'gemini-key', baseURL: `${gw.url}/v1beta/openai/`, maxRetries: 0 })
    const r = await settled('gemini_openai', () =>
      gemini.chat.completions.create({ model: 'gemini-2.5-flash', messages: [{ role: 'user', content: 'hi' }] }).withResponse(),
    )
    assert.equal(r.result.response.headers.get('ratelimit-limit'), '30000')
    assert.equal(r.used, 28)
    const s = await settled('gemini_openai', () =>
      callClient('ai-compatible', { root: gw.url, baseURL: `${gw.url}/v1beta/openai`, apiKey: 'gemini-key', stream: true }),
    )
    assert.equal(s.used, 200)
    assert.equal(upstream.seen.at(-1)!.path, '/v1beta/openai/chat/completions')
  })
})
