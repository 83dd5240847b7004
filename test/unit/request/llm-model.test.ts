/**
 * `llm:model` (src/request/llm-model.ts): read where the API of the path reads it (the path for
 * Azure deployments, Gemini and Vertex AI, Bedrock; the query for the Realtime API; else the
 * JSON body's `model`), so a body naming a cheap model beside a path naming an expensive one is
 * counted on the path's; a body naming two different models is ambiguous.
 */
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { AmbiguousRequest } from '../../../src/errors.js'
import { compileDescriptor } from '../../../src/request/descriptors.js'
import { llmModel, MAX_MODEL, modelOfPath, topLevelModels } from '../../../src/request/llm-model.js'
import { view, type Req } from '../../helpers/engine-harness.js'

const post = (path: string, body?: unknown, extra: Partial<Req> = {}): Req => ({
  method: 'POST',
  path,
  body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  ...extra,
})
const model = (r: Req): string | undefined => llmModel(view(r))

describe('the model of the path', () => {
  test('Azure OpenAI deployments: the deployment, whatever the body names', () => {
    assert.equal(model(post('/openai/deployments/gpt-4o-prod/chat/completions', { model: 'gpt-4o-mini' })), 'gpt-4o-prod')
    assert.equal(model(post('/OpenAI/Deployments/GPT-4o/chat/completions', { model: 'x' })), 'gpt-4o', 'any case')
  })
  test("Azure's v1 API and Azure AI inference name it in the body", () => {
    assert.equal(model(post('/openai/v1/chat/completions', { model: 'gpt-4o' })), 'gpt-4o')
    assert.equal(model(post('/models/chat/completions', { model: 'Phi-4' })), 'phi-4')
  })
  test('Gemini, Vertex AI and tuned models: the model before :method', () => {
    assert.equal(model(post('/v1beta/models/gemini-2.5-flash:generateContent', {})), 'gemini-2.5-flash')
    assert.equal(model(post('/v1/models/gemini-2.5-pro:streamGenerateContent', {})), 'gemini-2.5-pro')
    assert.equal(model(post('/v1beta/tunedModels/my-tune:generateContent', {})), 'my-tune')
    assert.equal(
      model(post('/v1/projects/p/locations/us-central1/publishers/anthropic/models/claude-sonnet-4@20250514:rawPredict', {})),
      'claude-sonnet-4@20250514',
    )
    assert.equal(modelOfPath('/v1beta/models/gemini-2.5-flash%3AgenerateContent'), 'gemini-2.5-flash', 'an escaped colon')
  })
  test('a models path without :method is not a model call: the body says', () => {
    assert.equal(modelOfPath('/v1/models/gpt-4o'), undefined)
    assert.equal(model(post('/v1/models/gpt-4o', { model: 'other' })), 'other')
  })
  test('Bedrock: the model id, percent-decoded, whatever the body says', () => {
    assert.equal(
      model(post('/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/converse', { model: 'cheap' })),
      'anthropic.claude-3-5-haiku-20241022-v1:0',
    )
    assert.equal(model(post('/model/amazon.nova-pro-v1:0/converse-stream', {})), 'amazon.nova-pro-v1:0')
    assert.equal(model(post('/model/meta.llama3-8b-instruct-v1:0/invoke', {})), 'meta.llama3-8b-instruct-v1:0')
    assert.equal(
      model(
        post('/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A1%3Ainference-profile%2Fus.x/invoke-with-response-stream', {}, { slashes: 'keep' }),
      ),
      'arn:aws:bedrock:us-east-1:1:inference-profile/us.x',
    )
  })
  test('the Realtime API: the query (model, or an Azure deployment)', () => {
    assert.equal(model({ path: '/v1/realtime', query: 'model=gpt-4o-realtime-preview' }), 'gpt-4o-realtime-preview')
    assert.equal(model({ path: '/openai/realtime', query: 'api-version=1&deployment=RT' }), 'rt')
    assert.throws(() => model({ path: '/v1/realtime', query: 'model=a&model=b' }), AmbiguousRequest)
  })
})

describe('the model of the body', () => {
  test('the top-level model, lower-cased', () => {
    assert.equal(model(post('/v1/chat/completions', { model: 'GPT-4o', messages: [] })), 'gpt-4o')
    assert.equal(model(post('/v1/messages', { model: 'claude-sonnet-4-5', max_tokens: 10 })), 'claude-sonnet-4-5')
    assert.equal(model(post('/api/chat', { model: 'llama3.2:3b' })), 'llama3.2:3b')
  })
  test('missing: no body, not JSON, no string model, an empty one', () => {
    assert.equal(model({ method: 'POST', path: '/v1/chat/completions' }), undefined)
    assert.equal(model(post('/v1/chat/completions', 'model=gpt-4o')), undefined)
    assert.equal(model(post('/v1/chat/completions', { model: 4 })), undefined)
    assert.equal(model(post('/v1/chat/completions', { model: '' })), undefined)
    assert.equal(model(post('/v1/chat/completions', { messages: [{ model: 'nested' }] })), undefined, 'a nested key is not the model')
  })
  test('a body larger than what was held is not read: missing', () => {
    const v = view(post('/v1/chat/completions', { model: 'gpt-4o' }, { headers: { 'content-length': String(2 * 1024 * 1024) } }))
    assert.equal(llmModel(v), undefined)
  })
  test('a name longer than MAX_MODEL is cut: a counter key stays bounded', () => {
    assert.equal(model(post('/v1/chat/completions', { model: 'm'.repeat(10_000) }))?.length, MAX_MODEL)
  })
  test('named twice with different values: ambiguous, as parsers disagree on which one counts', () => {
    const twice = '{"model":"gpt-4o-mini","messages":[],"model":"gpt-4o"}'
    assert.throws(() => model(post('/v1/chat/completions', twice)), AmbiguousRequest)
    // Spelled with escapes, JSON.parse still reads it as "model".
    const escaped = '{"model":"gpt-4o-mini","mod\\u0065l":"o3"}'
    assert.throws(() => model(post('/v1/chat/completions', escaped)), AmbiguousRequest)
    assert.throws(() => model(post('/v1/chat/completions', '{"model":"a","model":null}')), AmbiguousRequest)
    // No literal "model" at all: two escaped spellings.
    assert.throws(() => model(post('/v1/chat/completions', '{"mod\\u0065l":"a","\\u006dodel":"b"}')), AmbiguousRequest)
  })
  test('named twice with the same value, or "model" elsewhere (nested, in text): that value', () => {
    assert.equal(model(post('/v1/chat/completions', '{"model":"a","model":"a"}')), 'a')
    const elsewhere = {
      model: 'gpt-4o',
      messages: [{ role: 'user', content: 'say "model" and \u00e9' }],
      tools: [{ function: { parameters: { properties: { model: { type: 'string' } } } } }],
      metadata: { model: 'x' },
    }
    assert.equal(model(post('/v1/chat/completions', JSON.stringify(elsewhere).replace('é', '\\u00e9'))), 'gpt-4o')
  })
  test('topLevelModels reads only the top-level keys, strings with escapes and UTF-8 whole', () => {
    const b = Buffer.from('{"a":{"model":"x"},"b":["model",{"model":1}],"c":"\\"model\\"","model" : "é\\"q","d":[[{}]],"model":7}')
    assert.deepEqual(topLevelModels(b), ['é"q', null])
  })
})

test('llm:model as a descriptor reads the view once (a limit key and a price both ask)', () => {
  const d = compileDescriptor('llm:model')
  assert.ok(d.ok)
  const v = view(post('/v1/chat/completions', { model: 'gpt-4o' }))
  assert.equal(d.extract(v), 'gpt-4o')
  assert.equal(v.llmModel(), 'gpt-4o')
  const bad = compileDescriptor('llm:models')
  assert.deepEqual(bad, { ok: false, message: 'descriptor "llm:models" is unknown; llm: takes api_key or model' })
})
