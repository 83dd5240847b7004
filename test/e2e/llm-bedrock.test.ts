/**
 * AWS Bedrock's Converse API through the real gateway with the shipped
 * policies/llm-bedrock.json, driven by the AWS SDK (@aws-sdk/client-bedrock-runtime, its
 * endpoint at the gateway, static test credentials, one attempt) against an upstream
 * answering in the shapes of the public reference (test/helpers/bedrock-upstream.ts): calls
 * are keyed on the SigV4 access key id, counted (each settles at the camelCase usage, cache
 * reads as input), cut (ConverseStreamCommand yields contentBlockStop, messageStop with
 * stopReason max_tokens and metadata with the usage so far, all well-formed event-stream
 * messages), limited (429 that the SDK raises as ThrottlingException), and a stream whose
 * checksum fails ends with an internalServerException the SDK throws.
 */
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import {
  BedrockRuntimeClient,
  ConverseCommand,
  ConverseStreamCommand,
  type ConverseStreamOutput,
  InternalServerException,
  type ServiceInputTypes,
  type ServiceOutputTypes,
  ThrottlingException,
} from '@aws-sdk/client-bedrock-runtime'
import { NodeHttpHandler } from '@smithy/node-http-handler'
import type { FinalizeHandler, FinalizeHandlerArguments } from '@smithy/types'
import {
  CACHE_READ_TOKENS,
  deltaText,
  INPUT_TOKENS,
  SECRET_KEY,
  startBedrockUpstream,
  type BedrockUpstream,
} from '../helpers/bedrock-upstream.js'
import { settled } from '../helpers/llm-settle.js'
import { startGateway, type GatewayProcess } from '../helpers/processes.js'

const MODEL = 'anthropic.claude-3-5-haiku-20241022-v1:0'
const MESSAGES = [{ role: 'user' as const, content: [{ text: 'Tell me about rate limits.' }] }]
let up: BedrockUpstream
let gw: GatewayProcess
let keys = 0

/** A client signing with access key `akid`, sending `headers` (the upstream's script) on every call. */
function bedrock(
  headers: Record<string, string> = {},
  akid = `AKIATEST${process.pid}X${keys++}`,
  secret = 'test-secret',
): BedrockRuntimeClient {
  const client = new BedrockRuntimeClient({
    region: 'us-east-1',
    endpoint: gw.url,
    credentials: { accessKeyId: akid, secretAccessKey: secret },
    maxAttempts: 1,
    // The client speaks HTTP/2 by default; the gateway's listener speaks HTTP/1.1.
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

async function events(client: BedrockRuntimeClient, inference: object = {}): Promise<ConverseStreamOutput[]> {
  const r = await client.send(new ConverseStreamCommand({ modelId: MODEL, messages: MESSAGES, inferenceConfig: inference }))
  const out: ConverseStreamOutput[] = []
  for await (const e of r.stream!) out.push(e)
  return out
}

describe('Bedrock Converse (policies/llm-bedrock.json) with the AWS SDK', { timeout: 180_000 }, () => {
  before(async () => {
    up = await startBedrockUpstream()
    gw = await startGateway({
      FAIRVISOR_BACKEND_URL: up.url,
      FAIRVISOR_CONFIG_FILE: 'policies/llm-bedrock.json',
      FAIRVISOR_STORE: 'memory',
    })
  })

  after(async () => {
    const code = await gw?.stop()
    await up?.close()
    assert.equal(code, 0)
  })

  test('Converse settles at usage (input, cache reads, output); the signed request reaches the upstream as signed', async () => {
    const r = await settled(gw, 'bedrock', () =>
      bedrock({ 'x-usage-out': '321' }).send(
        new ConverseCommand({ modelId: MODEL, messages: MESSAGES, inferenceConfig: { maxTokens: 500 } }),
      ),
    )
    assert.equal(r.result.stopReason, 'end_turn')
    assert.equal(r.result.usage?.outputTokens, 321)
    assert.equal(r.used, INPUT_TOKENS + CACHE_READ_TOKENS + 321)
    const seen = up.requests.at(-1)!
    assert.equal(seen.url, '/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/converse')
    assert.match(
      String(seen.headers.authorization),
      /^AWS4-HMAC-SHA256 Credential=AKIATEST\d+X\d+\/\d{8}\/us-east-1\/bedrock\/aws4_request, /,
    )
    assert.deepEqual(seen.body.inferenceConfig, { maxTokens: 500 })
  })

  test('ConverseStream settles at the metadata event usage; every event passes whole', async () => {
    const r = await settled(gw, 'bedrock', () => events(bedrock({ 'x-chunks': '9', 'x-usage-out': '95' })))
    const text = r.result.map((e) => e.contentBlockDelta?.delta?.text ?? '').join('')
    assert.equal(text, Array.from({ length: 9 }, (_, i) => deltaText(i, 40)).join(''))
    assert.equal(r.result.find((e) => e.messageStop)?.messageStop?.stopReason, 'end_turn')
    assert.equal(r.result.at(-1)?.metadata?.usage?.outputTokens, 95)
    assert.equal(r.used, INPUT_TOKENS + CACHE_READ_TOKENS + 95)
  })

  test('a stream past 8192 counted tokens is cut: contentBlockStop, messageStop max_tokens, metadata with the usage so far', async () => {
    // 60 deltas of 800 characters: 200 tokens each, 12000 in all.
    const r = await settled(gw, 'bedrock', () => events(bedrock({ 'x-chunks': '60', 'x-chunk-chars': '800' }), { maxTokens: 60000 }))
    const deltas = r.result.filter((e) => e.contentBlockDelta)
    const tail = r.result.slice(-3)
    assert.deepEqual(tail[0]?.contentBlockStop, { contentBlockIndex: 0 })
    assert.deepEqual(tail[1]?.messageStop, { stopReason: 'max_tokens' })
    const u = tail[2]?.metadata?.usage
    assert.ok(u !== undefined)
    assert.equal(u.outputTokens, deltas.length * 200)
    assert.ok(u.outputTokens! > 8192 && u.outputTokens! <= 8192 + 200, `cut within one buffer past 8192 (${u.outputTokens})`)
    assert.equal(u.totalTokens, u.inputTokens! + u.outputTokens!)
    assert.equal(r.used, u.inputTokens! + u.outputTokens!, 'settled on what was streamed')
  })

  test('spent, an access key gets 429 as ThrottlingException, whatever its secret; another key passes', async () => {
    const akid = `AKIASPENT${process.pid}`
    await settled(gw, 'bedrock', () =>
      bedrock({ 'x-usage-out': '70000' }, akid).send(
        new ConverseCommand({ modelId: MODEL, messages: MESSAGES, inferenceConfig: { maxTokens: 100 } }),
      ),
    )
    const before = up.requests.length
    const err = await bedrock({}, akid, 'another-secret')
      .send(new ConverseCommand({ modelId: MODEL, messages: MESSAGES }))
      .then(
        () => assert.fail('allowed'),
        (e: unknown) => e,
      )
    assert.ok(err instanceof ThrottlingException, String(err))
    assert.equal(err.$metadata.httpStatusCode, 429)
    assert.equal(up.requests.length, before, 'not forwarded')
    const other = await bedrock().send(new ConverseCommand({ modelId: MODEL, messages: MESSAGES }))
    assert.equal(other.stopReason, 'end_turn')
  })

  test('signed for the upstream host and sent to the gateway, a request reaches the upstream with its Host and a valid signature', async () => {
    // The SDK's endpoint at the gateway: the request is signed for the gateway's host, which the gateway passes
    // on as Host; AWS answers only for its own.
    await bedrock().send(new ConverseCommand({ modelId: MODEL, messages: MESSAGES }))
    assert.equal(up.requests.at(-1)!.headers.host, `127.0.0.1:${gw.port}`)
    // Sign for the upstream (the SDK's endpoint), then send the signed request to the gateway.
    const client = new BedrockRuntimeClient({
      region: 'us-east-1',
      endpoint: up.url,
      credentials: { accessKeyId: 'AKIAVIAGATEWAY', secretAccessKey: SECRET_KEY },
      maxAttempts: 1,
      requestHandler: new NodeHttpHandler(),
    })
    client.middlewareStack.addRelativeTo(
      (next: FinalizeHandler<ServiceInputTypes, ServiceOutputTypes>) => (args: FinalizeHandlerArguments<ServiceInputTypes>) => {
        const r = args.request as { hostname: string; port?: number }
        r.hostname = '127.0.0.1'
        r.port = gw.port
        return next(args)
      },
      { relation: 'after', toMiddleware: 'httpSigningMiddleware', name: 'toGateway' },
    )
    const r = await settled(gw, 'bedrock', () =>
      client.send(new ConverseStreamCommand({ modelId: MODEL, messages: MESSAGES })).then(async (res) => {
        for await (const _ of res.stream!);
      }),
    )
    assert.equal(r.used, INPUT_TOKENS + CACHE_READ_TOKENS + 30)
    const seen = up.requests.at(-1)!
    assert.equal(seen.url, '/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/converse-stream')
    assert.equal(seen.headers.host, `127.0.0.1:${up.port}`, 'its own host')
    assert.equal(seen.signed, true)
    // The check sees a change: the same signed headers over another body do not check out.
    const replay: Record<string, string> = {}
    for (const [k, v] of Object.entries(seen.headers)) if (typeof v === 'string' && k !== 'content-length') replay[k] = v
    await fetch(`${up.url}${seen.url}`, {
      method: 'POST',
      headers: replay,
      body: JSON.stringify({ ...seen.body, system: [{ text: 'x' }] }),
    }).then((res) => res.arrayBuffer())
    assert.equal(up.requests.at(-1)!.signed, false)
  })

  test('a stream message that fails its checksum ends the stream with an internalServerException the SDK throws', async () => {
    const seen: ConverseStreamOutput[] = []
    const r = await settled(gw, 'bedrock', async () => {
      const res = await bedrock({ 'x-corrupt': '1', 'x-chunks': '5' }).send(
        new ConverseStreamCommand({ modelId: MODEL, messages: MESSAGES }),
      )
      try {
        for await (const e of res.stream!) seen.push(e)
      } catch (e) {
        return e
      }
      assert.fail('the stream ended without an error')
    })
    assert.ok(r.result instanceof InternalServerException, String(r.result))
    assert.equal(seen.length, 2, 'messageStart and the first delta, before the broken message')
    assert.equal(r.used, Math.ceil('Tell me about rate limits.'.length / 4) + 10, 'the prompt estimate and the one delta streamed')
  })
})
