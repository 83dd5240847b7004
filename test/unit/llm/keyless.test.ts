/**
 * A key-less LLM request (a local vLLM takes no API key) on a token_bucket_llm rule keyed on
 * llm:api_key is keyed on its client address, never skipped; no client can name that bucket by
 * sending it as a key; other rules keyed on llm:api_key still skip a request without one; logs
 * show the address as it is.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { bundle, compile, Harness, policy, rule, tb } from '../../helpers/engine-harness.js'
import { logKey } from '../../../src/engine/log-key.js'
import { isKeyless } from '../../../src/llm/keyless.js'

const llm = { name: 'tokens', limit_keys: ['llm:api_key'], algorithm: 'token_bucket_llm', algorithm_config: { tokens_per_minute: 3000 } }
const chat = (peer: string, headers: Record<string, string> = {}) => ({
  method: 'POST',
  path: '/v1/chat/completions',
  peer,
  headers,
  body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }], max_tokens: 999 }),
})

test('a request without an API key is keyed on its client address: each address has its own bucket', () => {
  const h = new Harness(compile(bundle([policy('p', [llm])])))
  const a = h.run(chat('192.0.2.7'))
  assert.equal(a.allowed, true)
  assert.deepEqual(
    a.llm?.map((r) => r.minute.key),
    ['tpm:llm:tokens:keyless,192.0.2.7'],
  )
  assert.equal(h.run(chat('192.0.2.7')).allowed, true)
  assert.equal(h.run(chat('192.0.2.7')).allowed, true)
  assert.equal(h.run(chat('192.0.2.7')).reason, 'tpm_exceeded', 'three reservations of 1,000 spent the bucket')
  assert.equal(h.run(chat('192.0.2.8')).allowed, true, 'another address, another bucket')
  assert.equal(h.run(chat('192.0.2.7', { authorization: 'Bearer sk-1' })).allowed, true, 'a key is its own bucket')
})

test('no client can send the key-less value as its key', () => {
  const h = new Harness(compile(bundle([policy('p', [llm])])))
  const d = h.run(chat('192.0.2.9', { authorization: 'Bearer keyless,192.0.2.7' }))
  assert.deepEqual([d.status, d.reason], [400, 'ambiguous_request'])
})

test('a rule of another algorithm keyed on llm:api_key still skips a request without a key', () => {
  const h = new Harness(compile(bundle([policy('p', [rule('r', ['llm:api_key'], tb(1, 1))])])))
  assert.equal(h.run(chat('192.0.2.7')).limit, undefined)
  assert.deepEqual(h.obs.missing, ['llm:api_key'])
})

test('logs show the address, and still hash keys', () => {
  const compiled = compile(bundle([policy('p', [llm])]))
  const r = compiled.policies.find((p) => p.id === 'p')!.rules[0]!
  assert.equal(logKey(r, 'tpm:llm:tokens:keyless,192.0.2.7', 'keyless,192.0.2.7'), 'tpm:llm:tokens:keyless,192.0.2.7')
  assert.match(logKey(r, 'tpm:llm:tokens:sk-1', 'sk-1'), /^tpm:llm:tokens:sha256:[0-9a-f]{12}$/)
  assert.equal(isKeyless('keyless,::1'), true)
  assert.equal(isKeyless('sk-1'), false)
})
