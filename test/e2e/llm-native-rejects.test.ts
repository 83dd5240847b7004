/**
 * Rejects that end (docs/llm.md) on the native provider APIs, through the real gateway with
 * each shipped bundle and FAIRVISOR_LLM_MAX_RETRY_AFTER at 10 s, against the recorded-shape
 * upstreams: a key whose minute bucket an overrun emptied (a wait far past the bound) is
 * answered 403 in the API's own error shape and a prompt larger than the bucket 400, and the
 * clients, retrying as they would a 429, reach the gateway once: @google/genai with its
 * retryOptions on (it retries 408, 429 and 5xx; it then raises a plain error, an ApiError without), the AWS SDK at its default three attempts
 * (it retries any ThrottlingException whatever the status: the 403 names
 * ServiceQuotaExceededException), Ollama's NDJSON API by fetch.
 */
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import {
  BedrockRuntimeClient,
  ConverseCommand,
  ServiceQuotaExceededException,
  ThrottlingException,
  ValidationException,
} from '@aws-sdk/client-bedrock-runtime'
import { ApiError, GoogleGenAI } from '@google/genai'
import { NodeHttpHandler } from '@smithy/node-http-handler'
import { startBedrockUpstream } from '../helpers/bedrock-upstream.js'
import { startGeminiUpstream } from '../helpers/gemini-upstream.js'
import { settled } from '../helpers/llm-settle.js'
import { startOllamaUpstream } from '../helpers/ollama-upstream.js'
import { startGateway, type GatewayProcess } from '../helpers/processes.js'

const BOUND = { FAIRVISOR_LLM_MAX_RETRY_AFTER: '10', FAIRVISOR_STORE: 'memory' }
/** A prompt of about 75,000 tokens by simple_word and by o200k_base: over every shipped bundle's bucket. */
const HUGE = 'rate limits keep tenants fair '.repeat(12_500)

/** Rejects of `policy` the gateway answered so far. */
const rejects = async (gw: GatewayProcess, policy: string): Promise<number> =>
  (await fetch(`${gw.url}/metrics`).then((r) => r.text()))
    .split('\n')
    .filter((l) => l.startsWith('fairvisor_decisions_total{') && l.includes('action="reject"') && l.includes(`policy="${policy}"`))
    .reduce((n, l) => n + Number(l.slice(l.lastIndexOf(' ') + 1)), 0)

async function failure(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    () => assert.fail('allowed'),
    (e: unknown) => e,
  )
}

describe('Gemini native: 403 PERMISSION_DENIED and 400 INVALID_ARGUMENT, not retried by @google/genai', { timeout: 120_000 }, () => {
  let gw: GatewayProcess
  let close: () => Promise<void>
  before(async () => {
    const up = await startGeminiUpstream()
    close = () => up.close()
    gw = await startGateway({ ...BOUND, FAIRVISOR_BACKEND_URL: up.url, FAIRVISOR_CONFIG_FILE: 'policies/llm-gemini.json' })
  })
  after(async () => {
    const code = await gw?.stop()
    await close?.()
    assert.equal(code, 0)
  })
  const genai = (apiKey: string, headers: Record<string, string> = {}): GoogleGenAI =>
    new GoogleGenAI({ apiKey, httpOptions: { baseUrl: gw.url, headers } })

  const retrying = (apiKey: string): GoogleGenAI =>
    new GoogleGenAI({ apiKey, httpOptions: { baseUrl: gw.url, retryOptions: { attempts: 3 } } })
  const MODEL = 'gemini-2.5-flash'

  test('a key whose bucket an overrun emptied: 403 PERMISSION_DENIED; with retryOptions on, one attempt', async () => {
    const key = `g-spent-${process.pid}`
    await settled(gw, 'gemini', () =>
      genai(key, { 'x-usage-out': '90000' }).models.generateContent({ model: MODEL, contents: 'Hi', config: { maxOutputTokens: 8192 } }),
    )
    const big = { model: MODEL, contents: 'Hi', config: { maxOutputTokens: 8192 } }
    const err = await failure(genai(key).models.generateContent(big))
    assert.ok(err instanceof ApiError, String(err))
    assert.equal(err.status, 403)
    assert.match(err.message, /PERMISSION_DENIED/)
    assert.match(err.message, /do not retry before then/)
    const before = await rejects(gw, 'gemini')
    const t0 = Date.now()
    // With retryOptions the SDK raises its p-retry abort for a status it does not retry.
    assert.match(String(await failure(retrying(key).models.generateContent(big))), /Non-retryable/)
    assert.equal((await rejects(gw, 'gemini')) - before, 1, 'not retried')
    assert.ok(Date.now() - t0 < 10_000)
  })

  test('a prompt larger than the bucket: 400 INVALID_ARGUMENT; with retryOptions on, one attempt', async () => {
    const key = `g-huge-${process.pid}`
    const err = await failure(genai(key).models.generateContent({ model: MODEL, contents: HUGE }))
    assert.ok(err instanceof ApiError, String(err))
    assert.equal(err.status, 400)
    assert.match(err.message, /INVALID_ARGUMENT/)
    const before = await rejects(gw, 'gemini')
    assert.match(String(await failure(retrying(key).models.generateContent({ model: MODEL, contents: HUGE }))), /Non-retryable/)
    assert.equal((await rejects(gw, 'gemini')) - before, 1, 'not retried')
  })
})

describe('Bedrock Converse: 403 ServiceQuotaExceededException and 400 ValidationException, not retried by the AWS SDK', {
  timeout: 120_000,
}, () => {
  let gw: GatewayProcess
  let close: () => Promise<void>
  before(async () => {
    const up = await startBedrockUpstream()
    close = () => up.close()
    gw = await startGateway({ ...BOUND, FAIRVISOR_BACKEND_URL: up.url, FAIRVISOR_CONFIG_FILE: 'policies/llm-bedrock.json' })
  })
  after(async () => {
    const code = await gw?.stop()
    await close?.()
    assert.equal(code, 0)
  })
  /** The SDK at its default retry settings (three attempts, throttling errors retried). */
  const bedrock = (akid: string, headers: Record<string, string> = {}): BedrockRuntimeClient => {
    const client = new BedrockRuntimeClient({
      region: 'us-east-1',
      endpoint: gw.url,
      credentials: { accessKeyId: akid, secretAccessKey: 'test-secret' },
      requestHandler: new NodeHttpHandler(),
    })
    client.middlewareStack.add(
      (next) => (args) => {
        Object.assign((args.request as { headers: Record<string, string> }).headers, headers)
        return next(args)
      },
      { step: 'build', name: 'upstreamScript' },
    )
    return client
  }
  const MODEL = 'anthropic.claude-3-5-haiku-20241022-v1:0'
  const converse = (text: string, maxTokens?: number): ConverseCommand =>
    new ConverseCommand({ modelId: MODEL, messages: [{ role: 'user', content: [{ text }] }], inferenceConfig: { maxTokens } })

  test('an access key whose bucket an overrun emptied: 403 ServiceQuotaExceededException, one attempt', async () => {
    const akid = `AKIASPENT${process.pid}`
    // The overrun is charged up to the burst: the bucket ends a reservation below zero, and another of 8192 waits past the bound.
    await settled(gw, 'bedrock', () => bedrock(akid, { 'x-usage-out': '90000' }).send(converse('Hi', 8192)))
    const before = await rejects(gw, 'bedrock')
    const err = await failure(bedrock(akid).send(converse('Hi', 8192)))
    assert.ok(err instanceof ServiceQuotaExceededException, String(err))
    assert.ok(!(err instanceof ThrottlingException))
    assert.equal(err.$metadata.httpStatusCode, 403)
    assert.equal(err.$metadata.attempts, 1)
    assert.match(err.message, /do not retry before then/)
    assert.equal((await rejects(gw, 'bedrock')) - before, 1, 'not retried')
  })

  test('a prompt larger than the bucket: 400 ValidationException, one attempt', async () => {
    const before = await rejects(gw, 'bedrock')
    const err = await failure(bedrock(`AKIAHUGE${process.pid}`).send(converse(HUGE)))
    assert.ok(err instanceof ValidationException, String(err))
    assert.equal(err.$metadata.httpStatusCode, 400)
    assert.equal((await rejects(gw, 'bedrock')) - before, 1, 'not retried')
  })
})

describe('Ollama native: 403 and 400 with its {"error"} body', { timeout: 120_000 }, () => {
  let gw: GatewayProcess
  let close: () => Promise<void>
  before(async () => {
    const up = await startOllamaUpstream()
    close = () => up.close()
    gw = await startGateway({ ...BOUND, FAIRVISOR_BACKEND_URL: up.url, FAIRVISOR_CONFIG_FILE: 'policies/llm-ollama.json' })
  })
  after(async () => {
    const code = await gw?.stop()
    await close?.()
    assert.equal(code, 0)
  })
  const chat = (content: string, headers: Record<string, string> = {}, num_predict = 100): Promise<Response> =>
    fetch(`${gw.url}/api/chat`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ model: 'llama3.2', messages: [{ role: 'user', content }], stream: false, options: { num_predict } }),
    })

  test('a prompt larger than the bucket: 400', async () => {
    const r = await chat(HUGE)
    assert.equal(r.status, 400)
    assert.equal(r.headers.get('x-should-retry'), 'false')
    assert.match(((await r.json()) as { error: string }).error, /can ever hold/)
  })

  test('an address whose bucket an overrun emptied: 403, x-should-retry false, Retry-After past the bound', async () => {
    await settled(gw, 'ollama', () => chat('Hi', { 'x-usage-out': '30000' }, 4096).then((r) => r.text()))
    const r = await chat('Hi', {}, 4096)
    assert.equal(r.status, 403)
    assert.equal(r.headers.get('x-should-retry'), 'false')
    assert.ok(Number(r.headers.get('retry-after')) > 10)
    assert.match(((await r.json()) as { error: string }).error, /do not retry before then/)
  })
})
