/**
 * What an LLM rule reads of a request and bounds in a settlement, one part
 * at a time: the billed fields of the body, the completion reserved, a lax
 * `stream`, the overrun cap, `llm:api_key` and the hashing of credentials in
 * logged keys. (test/e2e/llm-attacks.test.ts drives the same through the
 * real gateway.)
 */
import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { test } from 'node:test'
import { normaliseLlm } from '../../../src/algorithms/llm.js'
import type { LlmReservation } from '../../../src/engine/decision.js'
import { AmbiguousRequest } from '../../../src/errors.js'
import { logKey } from '../../../src/engine/log-key.js'
import { estimatePrompt } from '../../../src/llm/estimate.js'
import { IMAGE_TOKENS } from '../../../src/llm/prompt-parts.js'
import { parseLlmBody } from '../../../src/llm/request-body.js'
import { settleAdjustments, type OverrunCapped } from '../../../src/llm/settle-cap.js'
import { compileDescriptor } from '../../../src/request/descriptors.js'
import { RequestView } from '../../../src/request/view.js'
import { compile, bundle, policy } from '../../helpers/engine-harness.js'

const body = (o: object): ReturnType<typeof parseLlmBody> => parseLlmBody(Buffer.from(JSON.stringify(o)), undefined)
const sw = (o: object): number => estimatePrompt('simple_word', 'o200k_base', body(o), undefined)

test('simple_word counts every billed field, not only messages', () => {
  const t = 'x'.repeat(400) // 100 tokens
  assert.equal(sw({ messages: [{ role: 'user', content: t }] }), 100)
  assert.equal(sw({ messages: [], system: t }), 100)
  assert.equal(
    sw({
      system: [
        { type: 'text', text: t },
        { type: 'text', text: t },
      ],
    }),
    200,
  )
  assert.equal(sw({ prompt: [t, t] }), 200)
  assert.equal(sw({ prompt: [1, 2, 3] }), 3, 'token ids count one each')
  assert.equal(sw({ input: t }), 100)
  assert.equal(
    sw({
      input: [
        { role: 'user', content: [{ type: 'input_text', text: t }] },
        { type: 'function_call_output', call_id: 'c', output: t },
      ],
    }),
    200,
  )
  assert.equal(sw({ instructions: t }), 100)
  assert.equal(
    sw({
      messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: `data:image/png;base64,${'A'.repeat(100000)}` } }] }],
    }),
    IMAGE_TOKENS,
    'an image is a fixed cost, not its base64 length',
  )
  const tools = [{ type: 'function', function: { name: 'f', description: t } }]
  assert.equal(sw({ messages: [], tools }), Math.ceil(JSON.stringify(tools).length / 4))
  assert.equal(sw({ tool_choice: 'auto', messages: [] }), Math.ceil('"auto"'.length / 4))
  const call = [{ id: 'c', type: 'function', function: { name: 'f', arguments: t } }]
  assert.equal(sw({ messages: [{ role: 'assistant', content: null, tool_calls: call }] }), Math.ceil(JSON.stringify(call).length / 4))
  assert.equal(
    sw({ model: 'x'.repeat(400) }),
    Math.ceil(JSON.stringify({ model: 'x'.repeat(400) }).length / 4),
    'JSON without billed fields: its size',
  )
})

test('tokenizer counts tools and system like messages', () => {
  const t = 'hello world '.repeat(100)
  const tk = (o: object): number => estimatePrompt('tokenizer', 'o200k_base', body(o), undefined)
  const base = tk({ messages: [{ role: 'user', content: 'hi' }] })
  assert.ok(
    tk({ messages: [{ role: 'user', content: 'hi' }], tools: [{ type: 'function', function: { name: 'f', description: t } }] }) >
      base + 190,
  )
  assert.ok(tk({ messages: [{ role: 'user', content: 'hi' }], system: t }) > base + 190)
})

test('the completion reserved is the largest completion field; stream is read as lax upstreams read it', () => {
  assert.equal(body({ max_tokens: 1, max_completion_tokens: 100000 }).maxTokens, 100000)
  assert.equal(body({ max_output_tokens: 300, max_tokens: 20 }).maxTokens, 300)
  assert.equal(body({ max_tokens: '5000' }).maxTokens, 5000)
  assert.equal(body({ max_tokens: -1 }).maxTokens, undefined)
  for (const v of [true, 'true', 'True', 1, 'yes', {}]) assert.equal(body({ stream: v }).stream, true, JSON.stringify(v))
  for (const v of [false, 'false', 0, '', null, undefined]) assert.equal(body({ stream: v }).stream, false, JSON.stringify(v))
})

test('choices: the largest of n and best_of, as lax upstreams read them; 1 otherwise, and finite whatever the body says', () => {
  assert.equal(body({}).choices, 1)
  assert.equal(body({ n: 5 }).choices, 5)
  assert.equal(body({ n: '3' }).choices, 3)
  assert.equal(body({ n: 2.5 }).choices, 3)
  assert.equal(body({ n: 2, best_of: 4 }).choices, 4)
  for (const v of [0, -3, 'x', null, true]) assert.equal(body({ n: v }).choices, 1, JSON.stringify(v))
  assert.equal(parseLlmBody(Buffer.from('{"n":1e400}'), undefined).choices, 1_000_000)
})

function reservation(reserved: number, day: boolean): LlmReservation {
  const config = normaliseLlm({ tokens_per_minute: 600, burst_tokens: 1000, ...(day ? { tokens_per_day: 5000 } : {}) })
  return {
    policyId: 'p',
    ruleName: 'r',
    shadow: false,
    config,
    minute: { key: 'tpm', limit: config },
    day: day ? { key: 'tpd', limit: config.day! } : undefined,
    prompt: 5,
    reserved,
    choices: 1,
    streaming: true,
  }
}

test('an overrun is charged at most the burst and tokens_per_day, and reported; refunds are whole', () => {
  const seen: OverrunCapped[] = []
  assert.deepEqual(
    settleAdjustments(reservation(100, true), 1e15 + 1, (c) => seen.push(c)).map((a) => [a.key, a.amount]),
    [
      ['tpm', -1000],
      ['tpd', -5000],
    ],
  )
  assert.equal(seen.length, 1)
  assert.equal(seen[0]!.reported, 1e15 + 1)
  assert.deepEqual(
    settleAdjustments(reservation(100, true), 400, (c) => seen.push(c)).map((a) => a.amount),
    [-300, -300],
    'an overrun within the caps is charged whole',
  )
  assert.deepEqual(
    settleAdjustments(reservation(100, false), 30).map((a) => a.amount),
    [70],
  )
  assert.deepEqual(settleAdjustments(reservation(100, false), 100), [])
  assert.deepEqual(settleAdjustments(reservation(100, false), Number.NaN), [], 'a usage that is not a number keeps the reservation')
  assert.equal(seen.length, 1)
})

test('llm:api_key is the credential the API of the path bills; different credentials it could read are refused', () => {
  const d = compileDescriptor('llm:api_key')
  assert.ok(d.ok)
  const key = (path: string, headers: Record<string, string | string[]>): string | undefined => {
    const rawHeaders: string[] = []
    for (const [k, v] of Object.entries(headers)) for (const x of Array.isArray(v) ? v : [v]) rawHeaders.push(k, x)
    return d.extract(new RequestView({ method: 'POST', path, rawQuery: '', host: 'h', peer: '127.0.0.1', rawHeaders }, undefined))
  }
  const OPENAI = '/v1/chat/completions'
  const ANTHROPIC = '/v1/messages'
  const AZURE = '/openai/deployments/gpt/chat/completions'
  // One credential: that key, wherever it is sent.
  for (const path of [OPENAI, ANTHROPIC, AZURE, '/v1/models']) {
    assert.equal(key(path, { authorization: 'Bearer sk-1' }), 'sk-1', path)
    assert.equal(key(path, { authorization: 'bearer  sk-1 ' }), 'sk-1', path)
    assert.equal(key(path, { 'x-api-key': 'sk-ant-1' }), 'sk-ant-1', path)
    assert.equal(key(path, { 'api-key': 'az-1' }), 'az-1', path)
    assert.equal(key(path, { authorization: 'Basic dXNlcjpwdw==' }), undefined, path)
    assert.equal(key(path, {}), undefined, path)
    assert.equal(key(path, { 'x-api-key': 'k', authorization: 'Bearer k' }), 'k', `${path}: one key in two headers is one key`)
  }
  // OpenAI bills the bearer token and ignores the others: junk beside it is not the key.
  assert.equal(key(OPENAI, { authorization: 'Bearer sk-REAL', 'x-api-key': 'junk' }), 'sk-REAL')
  assert.equal(key('/v1/responses', { authorization: 'Bearer sk-REAL', 'api-key': 'junk', 'x-api-key': ['j1', 'j2'] }), 'sk-REAL')
  assert.equal(key('/v1/embeddings', { 'x-api-key': 'junk', authorization: 'Bearer sk-REAL' }), 'sk-REAL')
  // Azure OpenAI reads api-key (and Entra ID bearer tokens), not x-api-key.
  assert.equal(key(AZURE, { 'api-key': 'az-REAL', 'x-api-key': 'junk' }), 'az-REAL')
  assert.equal(key('/openai/v1/responses', { 'x-api-key': 'junk', 'api-key': 'az-REAL' }), 'az-REAL')
  // Anthropic reads x-api-key, not api-key.
  assert.equal(key(ANTHROPIC, { 'x-api-key': 'sk-ant-REAL', 'api-key': 'junk' }), 'sk-ant-REAL')
  // Two different credentials the API could read, or one repeated with two values: refused.
  const refused: [string, Record<string, string | string[]>][] = [
    [ANTHROPIC, { 'x-api-key': 'sk-ant-REAL', authorization: 'Bearer junk' }],
    [ANTHROPIC, { authorization: 'Bearer sk-ant-REAL', 'x-api-key': 'junk' }],
    ['/v1/messages/count_tokens', { 'x-api-key': 'a', authorization: 'Bearer b' }],
    [AZURE, { 'api-key': 'az-REAL', authorization: 'Bearer junk' }],
    [OPENAI, { authorization: ['Bearer junk', 'Bearer sk-REAL'] }],
    [OPENAI, { authorization: 'Bearer junk,Bearer sk-REAL' }],
    [OPENAI, { 'x-api-key': 'a', 'api-key': 'b' }],
    [ANTHROPIC, { 'x-api-key': ['junk', 'sk-ant-REAL'] }],
    [ANTHROPIC, { 'x-api-key': 'junk, sk-ant-REAL' }],
    [AZURE, { 'api-key': ['junk', 'az-REAL'] }],
    ['/v1/models', { authorization: 'Bearer sk-REAL', 'x-api-key': 'junk' }],
  ]
  for (const [path, headers] of refused) assert.throws(() => key(path, headers), AmbiguousRequest, `${path} ${JSON.stringify(headers)}`)
  // X_Api_Key is not x-api-key.
  assert.equal(key(ANTHROPIC, { X_Api_Key: 'junk', 'x-api-key': 'sk-ant-REAL' }), 'sk-ant-REAL')
  assert.equal(key(ANTHROPIC, { Api_Key: 'junk' }), undefined)
  assert.equal(compileDescriptor('llm:other').ok, false)
})

test('credentials in a logged key are a short hash; other values stay', () => {
  const b = compile(
    bundle([
      policy('p', [
        {
          name: 'r',
          limit_keys: ['jwt:org', 'header:authorization'],
          algorithm: 'token_bucket',
          algorithm_config: { tokens_per_second: 1, burst: 1 },
        },
        { name: 'plain', limit_keys: ['header:x-tenant'], algorithm: 'token_bucket', algorithm_config: { tokens_per_second: 1, burst: 1 } },
      ]),
    ]),
  )
  const [secret, plain] = b.policies[0]!.rules
  const h = createHash('sha256').update('Bearer sk-1').digest('hex').slice(0, 12)
  assert.equal(logKey(secret!, 'tb:r:acme|Bearer sk-1', 'acme|Bearer sk-1'), `tb:r:acme|sha256:${h}`)
  assert.doesNotMatch(logKey(secret!, 'tb:r:acme|Bearer sk|1', 'acme|Bearer sk|1'), /sk/, 'a value holding | hashes the whole composite')
  assert.equal(logKey(plain!, 'tb:plain:t1', 't1'), 'tb:plain:t1')
})
