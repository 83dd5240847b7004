/**
 * The provider APIs' readers (src/llm/providers/): which API a path names, the usage each
 * reports (Gemini's usageMetadata, Bedrock's camelCase usage and invocation metrics,
 * Ollama's counts) as settled, the completion text of their stream chunks, the output caps
 * their requests ask for, and the prompt parts the estimate reads from their bodies.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { estimatePrompt } from '../../../../src/llm/estimate.js'
import { providerCap, providerOfPath, providerText } from '../../../../src/llm/providers/index.js'
import { isBedrockInvoke, isGeminiStream, pathOnly } from '../../../../src/llm/providers/paths.js'
import { parseLlmBody } from '../../../../src/llm/request-body.js'
import { collectUsage, deltaText, usageFromTail, type Usage } from '../../../../src/llm/usage.js'

const usage = (o: object): Usage => {
  const u: Usage = { prompt: undefined, completion: undefined }
  collectUsage(o, u)
  return u
}

test('paths name their provider; others name none', () => {
  for (const [p, api] of [
    ['/v1beta/models/gemini-2.5-flash:generateContent', 'gemini'],
    ['/v1beta/models/gemini-2.5-flash:streamGenerateContent', 'gemini'],
    ['/v1beta/models/gemini-2.5-flash%3AcountTokens', 'gemini'],
    ['/v1beta/tunedModels/my-model:generateContent', 'gemini'],
    ['/v1/projects/p/locations/us-central1/publishers/google/models/gemini-2.5-pro:generateContent', 'gemini'],
    ['/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/converse', 'bedrock'],
    ['/model/arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude/converse-stream', 'bedrock'],
    ['/model/amazon.titan-text/invoke-with-response-stream', 'bedrock'],
    ['/api/chat', 'ollama'],
    ['/ollama/api/generate', 'ollama'],
    ['/api/embed', 'ollama'],
    ['/v1/chat/completions', undefined],
    ['/v1beta/models', undefined],
    ['/v1beta/models/gemini-2.5-flash', undefined],
    ['/model/x/converse/other', undefined],
    ['/api/users', undefined],
    ['/', undefined],
  ] as const)
    assert.equal(providerOfPath(p), api, p)
  assert.equal(pathOnly('/v1beta/models/m:streamGenerateContent?alt=sse'), '/v1beta/models/m:streamGenerateContent')
  assert.ok(isGeminiStream('/v1beta/models/m%3astreamGenerateContent'))
  assert.ok(!isGeminiStream('/v1beta/models/m:generateContent'))
  assert.ok(isBedrockInvoke('/model/m/invoke') && isBedrockInvoke('/model/m/invoke-with-response-stream'))
  assert.ok(!isBedrockInvoke('/model/m/converse'))
})

test('Gemini usageMetadata: prompt with tool-use prompt tokens, candidates with thoughts; a partial one counts what it says', () => {
  const whole = usage({
    usageMetadata: {
      promptTokenCount: 100,
      cachedContentTokenCount: 60,
      toolUsePromptTokenCount: 5,
      candidatesTokenCount: 40,
      thoughtsTokenCount: 300,
      totalTokenCount: 445,
    },
  })
  assert.deepEqual([whole.prompt, whole.completion], [105, 340])
  const early = usage({ usageMetadata: { promptTokenCount: 8, totalTokenCount: 8 } })
  assert.deepEqual([early.prompt, early.completion], [8, 0])
  const later = usage({ usageMetadata: { promptTokenCount: 8, totalTokenCount: 20 } })
  assert.deepEqual([later.prompt, later.completion], [8, 12])
  // The last chunk of a stream wins over the earlier ones.
  const u: Usage = { prompt: undefined, completion: undefined }
  for (const c of [5, 10, 15]) collectUsage({ usageMetadata: { promptTokenCount: 8, candidatesTokenCount: c, totalTokenCount: 8 + c } }, u)
  assert.deepEqual([u.prompt, u.completion], [8, 15])
  // Only the chunk with a finishReason carries the final figure (a client that leaves earlier is settled on the count).
  const meta = { usageMetadata: { promptTokenCount: 8, candidatesTokenCount: 5 } }
  const scratch: Usage = { prompt: undefined, completion: undefined }
  assert.equal(collectUsage({ candidates: [{ content: { parts: [{ text: 'a' }] } }], ...meta }, scratch), false)
  assert.equal(collectUsage({ candidates: [{ content: { parts: [] }, finishReason: 'STOP' }], ...meta }, scratch), true)
  assert.equal(collectUsage({ usage: { inputTokens: 1, outputTokens: 2 } }, scratch), true)
  assert.equal(collectUsage({ model: 'llama3', done: false, message: { content: 'a' } }, scratch), false)
  assert.equal(collectUsage({ model: 'llama3', done: true, eval_count: 3 }, scratch), true)
  // countTokens is free.
  assert.deepEqual(Object.values(usage({ totalTokens: 31, promptTokensDetails: [] })).slice(0, 2), [0, 0])
})

test('Bedrock usage: cache reads and writes are input beside inputTokens; invocation metrics; the tail of a large answer', () => {
  const u = usage({ usage: { inputTokens: 25, outputTokens: 40, totalTokens: 75, cacheReadInputTokens: 7, cacheWriteInputTokens: 3 } })
  assert.deepEqual([u.prompt, u.completion], [35, 40])
  const inv = usage({ type: 'message_stop', 'amazon-bedrock-invocationMetrics': { inputTokenCount: 9, outputTokenCount: 4 } })
  assert.deepEqual([inv.prompt, inv.completion], [9, 4])
  // OpenAI's and Anthropic's usage objects are not mistaken for Bedrock's.
  assert.deepEqual(Object.values(usage({ usage: { prompt_tokens: 3, completion_tokens: 2 } })).slice(0, 2), [3, 2])
  const tail: Usage = { prompt: undefined, completion: undefined }
  usageFromTail(
    `${'x'.repeat(100)}"]}}},"stopReason":"end_turn","usage":{"inputTokens":11,"outputTokens":22,"totalTokens":33},"metrics":{"latencyMs":5}}`,
    tail,
  )
  assert.deepEqual([tail.prompt, tail.completion], [11, 22])
  const gem: Usage = { prompt: undefined, completion: undefined }
  usageFromTail(
    `AAAA"}}]}}],"usageMetadata":{"promptTokenCount":4,"candidatesTokenCount":1290,"totalTokenCount":1294},"modelVersion":"m"}`,
    gem,
  )
  assert.deepEqual([gem.prompt, gem.completion], [4, 1290])
})

test('Ollama counts on the done object (absent counts are zero); embed reports its prompt; /api/show uses nothing', () => {
  const done = usage({ model: 'llama3.2', done: true, done_reason: 'stop', prompt_eval_count: 26, eval_count: 282 })
  assert.deepEqual([done.prompt, done.completion], [26, 282])
  const cached = usage({ model: 'llama3.2', done: true, eval_count: 5 })
  assert.deepEqual([cached.prompt, cached.completion], [0, 5])
  const chunk = usage({ model: 'llama3.2', done: false, message: { role: 'assistant', content: 'x' } })
  assert.deepEqual([chunk.prompt, chunk.completion], [undefined, undefined])
  const embed = usage({ model: 'all-minilm', embeddings: [[0.1]], prompt_eval_count: 8 })
  assert.deepEqual([embed.prompt, embed.completion], [8, undefined])
  const show = usage({ modelfile: '# Modelfile', parameters: '', details: {}, model_info: {} })
  assert.deepEqual([show.prompt, show.completion], [0, 0])
})

test('stream chunks: the completion text each adds', () => {
  assert.equal(
    deltaText({
      candidates: [
        { content: { parts: [{ text: 'Hel', thought: true }, { text: 'lo' }, { functionCall: { name: 'f', args: { a: 1 } } }] }, index: 0 },
        { content: { parts: [{ executableCode: { language: 'PYTHON', code: 'print(1)' } }] }, index: 1 },
      ],
    }),
    'Hello{"name":"f","args":{"a":1}}{"language":"PYTHON","code":"print(1)"}',
  )
  assert.equal(deltaText({ contentBlockIndex: 0, delta: { text: 'Hi' } }), 'Hi')
  assert.equal(deltaText({ contentBlockIndex: 1, delta: { toolUse: { input: '{"a":' } } }), '{"a":')
  assert.equal(deltaText({ contentBlockIndex: 0, delta: { reasoningContent: { text: 'hmm' } } }), 'hmm')
  assert.equal(
    deltaText({
      model: 'm',
      done: false,
      message: { role: 'assistant', content: 'a', thinking: 'b', tool_calls: [{ function: { name: 'f' } }] },
    }),
    'ab[{"function":{"name":"f"}}]',
  )
  assert.equal(deltaText({ model: 'm', done: false, response: 'r', thinking: 't' }), 'rt')
  // Anthropic's own events are read as before.
  assert.equal(deltaText({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'x' } }), 'x')
  assert.equal(providerText({ type: 'message_delta', delta: { stop_reason: 'end_turn' } }), '')
})

test('output caps: maxOutputTokens (either spelling) × candidateCount, inferenceConfig.maxTokens, positive num_predict', () => {
  assert.equal(providerCap({ generationConfig: { maxOutputTokens: 300, candidateCount: 3 } }), 900)
  assert.equal(providerCap({ generation_config: { max_output_tokens: '250' } }), 250)
  assert.equal(providerCap({ generationConfig: { maxOutputTokens: 100, max_output_tokens: 400 } }), 400)
  assert.equal(providerCap({ generationConfig: { candidateCount: 4 } }), undefined)
  assert.equal(providerCap({ inferenceConfig: { maxTokens: 512 } }), 512)
  assert.equal(providerCap({ options: { num_predict: 128 } }), 128)
  assert.equal(providerCap({ options: { num_predict: -1 } }), undefined)
  assert.equal(providerCap({ options: { num_predict: -2 } }), undefined)
  // Reserved as the largest of the fields present, OpenAI's too.
  assert.equal(parseLlmBody(Buffer.from(JSON.stringify({ max_tokens: 50, inferenceConfig: { maxTokens: 70 } })), undefined).maxTokens, 70)
})

test('prompt estimates read the providers bodies: media at a fixed cost, not their base64', () => {
  const est = (body: object): number =>
    estimatePrompt('simple_word', 'o200k_base', parseLlmBody(Buffer.from(JSON.stringify(body)), undefined), undefined)
  const text = 'abcd'.repeat(100) // 100 tokens
  const b64 = 'A'.repeat(80_000)
  assert.equal(
    est({
      contents: [
        { role: 'user', parts: [{ text }, { inlineData: { mimeType: 'image/png', data: b64 } }, { fileData: { fileUri: 'gs://x' } }] },
      ],
      systemInstruction: { parts: [{ text }] },
    }),
    100 + 100 + 2000,
  )
  assert.equal(est({ system_instruction: { parts: [{ text }] }, contents: [{ parts: [{ inline_data: { data: b64 } }] }] }), 100 + 1000)
  assert.equal(
    est({
      messages: [{ role: 'user', content: [{ text }, { image: { format: 'png', source: { bytes: b64 } } }, { video: { format: 'mp4' } }] }],
      system: [{ text }],
    }),
    100 + 100 + 2000,
  )
  assert.equal(
    est({ toolConfig: { tools: [] }, messages: [{ role: 'user', content: [{ text }] }] }),
    100 + Math.ceil('{"tools":[]}'.length / 4),
  )
  assert.equal(est({ model: 'llava', messages: [{ role: 'user', content: text, images: [b64, b64] }] }), 100 + 2000)
  assert.equal(est({ model: 'llava', prompt: text, suffix: text, system: text, images: [b64] }), 300 + 1000)
})
