/**
 * What is not a prompt (docs/llm.md): batch creation, the file and upload APIs and any multipart
 * upload are neither read, estimated nor reserved by a token_bucket_llm rule, so the shipped
 * OpenAI bundle does not refuse a large upload as an oversized prompt.
 */
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { test } from 'node:test'
import { compile, Harness, view } from '../../helpers/engine-harness.js'
import { bodyBudget } from '../../../src/http/llm-body.js'
import { notAPrompt } from '../../../src/llm/not-prompt.js'
import { ROOT } from '../../helpers/processes.js'

test('batches, files, uploads and multipart bodies are not prompts; chat, completions and responses are', () => {
  const is = (path: string, type = 'application/json') => notAPrompt(view({ method: 'POST', path, headers: { 'content-type': type } }))
  for (const p of ['/v1/batches', '/v1/batches/batch_1/cancel', '/v1/files', '/v1/uploads/upload_1/parts', '/openai/v1/files'])
    assert.equal(is(p), true, p)
  assert.equal(is('/v1/audio/transcriptions', 'multipart/form-data; boundary=x'), true)
  assert.equal(is('/v1/images/edits', ' Multipart/Form-Data; boundary=x'), true)
  for (const p of ['/v1/chat/completions', '/v1/completions', '/v1/responses', '/v1/messages', '/v1/batchesx', '/v1/profiles'])
    assert.equal(is(p), false, p)
})

test('the shipped OpenAI bundle reserves nothing for a batch or a large upload and never holds their bodies', () => {
  const bundle = compile(JSON.parse(readFileSync(`${ROOT}policies/llm-openai.json`, 'utf8')))
  const h = new Harness(bundle)
  const upload = {
    method: 'POST',
    path: '/v1/audio/transcriptions',
    headers: { authorization: 'Bearer sk-1', 'content-type': 'multipart/form-data; boundary=b', 'content-length': '26214400' },
  }
  const d = h.run(upload)
  assert.deepEqual([d.allowed, d.llm], [true, undefined])
  const batch = h.run({
    method: 'POST',
    path: '/v1/batches',
    headers: { authorization: 'Bearer sk-1' },
    body: JSON.stringify({ input_file_id: 'file-abc', endpoint: '/v1/chat/completions', completion_window: '24h' }),
  })
  assert.deepEqual([batch.allowed, batch.llm], [true, undefined])
  const input = { method: 'POST', path: '/v1/audio/transcriptions', alsoPaths: undefined, rawQuery: '', host: 'h', peer: '1.1.1.1' }
  assert.equal(bodyBudget(bundle, { ...input, rawHeaders: ['content-type', 'multipart/form-data; boundary=b'] }), undefined)
  assert.ok((bodyBudget(bundle, { ...input, path: '/v1/chat/completions', rawHeaders: [] }) ?? 0) > 0)
})
