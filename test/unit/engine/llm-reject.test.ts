/**
 * Rejects that end (docs/llm.md): a token_bucket_llm counter's reject waits at
 * most FAIRVISOR_LLM_MAX_RETRY_AFTER as a 429, jitter included; a longer wait
 * is a 403; a reservation the bucket (or the day) can never hold is a 400
 * burst_tokens_exceeded before any store call; the day counter's jitter ends
 * within 60 s of the reset. Through the real engine and memory store.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { bundle, compile, Harness, policy, Recorder, T0, view } from '../../helpers/engine-harness.js'
import type { Decision } from '../../../src/engine/decision.js'
import { Engine } from '../../../src/engine/evaluate.js'
import { boundLlmReject } from '../../../src/engine/llm-reject.js'
import { MemoryStore } from '../../../src/store/memory/store.js'

const llm = (config: object): object => ({
  name: 'tokens',
  limit_keys: ['header:x-key'],
  algorithm: 'token_bucket_llm',
  algorithm_config: config,
})
const chat = (maxTokens: number, key = 'k'): { headers: Record<string, string>; body: string; path: string } => ({
  path: '/v1/chat/completions',
  headers: { 'x-key': key },
  body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }], max_tokens: maxTokens }),
})

function harness(config: object, bound?: number): Harness {
  const h = new Harness(compile(bundle([policy('p', [llm(config)])])))
  if (bound === undefined) return h
  const engine = new Engine({ store: h.store, failPolicy: 'open', observer: h.obs, llmMaxRetryAfterS: bound })
  Object.assign(h, { engine })
  return h
}

test('a minute-bucket reject within the bound is a 429 whose jittered Retry-After never passes the bound', () => {
  // 60 tokens/min: 1 token/s. The first request drains the bucket; the second waits about 50 s (+ jitter up to 25 s).
  const h = harness({ tokens_per_minute: 60 })
  assert.equal(h.run(chat(55)).allowed, true)
  for (let k = 0; k < 40; k++) {
    const d = h.run({ ...chat(49), peer: `10.0.0.${k}` })
    assert.equal(d.status, 429)
    assert.equal(d.reason, 'tpm_exceeded')
    assert.ok(d.retryAfterS! >= d.limit!.resetS && d.retryAfterS! <= 60, `Retry-After ${d.retryAfterS} for a wait of ${d.limit!.resetS}`)
  }
})

test('a wait past the bound is a 403 with the wait in its message; the bound is a setting', () => {
  const h = harness({ tokens_per_minute: 60 }, 10)
  assert.equal(h.run(chat(55)).allowed, true)
  const d = h.run(chat(49))
  assert.equal(d.status, 403)
  assert.equal(d.reason, 'tpm_exceeded')
  assert.match(d.message!, /tokens per minute\. It resets in 4\d s/)
  const short = h.run(chat(1), 55)
  assert.equal(short.allowed, true, 'the bucket refilled 55 tokens by then')
})

test('a spent day is a 403 whose Retry-After passes the reset by at most 60 s', () => {
  const h = harness({ tokens_per_minute: 1_000_000, tokens_per_day: 100 })
  assert.equal(h.run(chat(80)).allowed, true)
  const toMidnight = 86_400 - 3600
  let most = 0
  for (let k = 0; k < 50; k++) {
    const d = h.run({ ...chat(80), peer: `10.0.1.${k}` }, 3600)
    assert.equal(d.status, 403)
    assert.equal(d.reason, 'tpd_exceeded')
    assert.equal(d.limit!.resetS, toMidnight)
    assert.ok(d.retryAfterS! >= toMidnight && d.retryAfterS! <= toMidnight + 60, String(d.retryAfterS))
    most = Math.max(most, d.retryAfterS! - toMidnight)
  }
  assert.ok(most > 10, 'clients are still spread')
})

test('a spent day whose reset is within the bound is a 429 that can be retried', () => {
  const h = harness({ tokens_per_minute: 1_000_000, tokens_per_day: 100 })
  assert.equal(h.run(chat(80)).allowed, true)
  const d = h.run(chat(80), 86_400 - 30)
  assert.equal(d.status, 429)
  assert.ok(d.retryAfterS! >= 30 && d.retryAfterS! <= 60)
})

test('a reservation larger than the burst (or the day) is a 400 burst_tokens_exceeded with its figures, before any store call', () => {
  const h = harness({ tokens_per_minute: 1000, burst_tokens: 2000, tokens_per_day: 5000 })
  const d = h.run(chat(2500))
  assert.deepEqual([d.status, d.reason], [400, 'burst_tokens_exceeded'])
  assert.match(d.message!, /\(25\d\d tokens\) exceed .* \(2000 tokens\)/)
  assert.equal(h.run(chat(1990)).allowed, true, 'nothing was charged by the reject')
  const day = harness({ tokens_per_minute: 1000, burst_tokens: 2000, tokens_per_day: 1500 })
  assert.match(day.run(chat(1600)).message!, /\(1500 tokens\)/)
})

test('in a shadow policy an over-burst reservation is reported, never refused', () => {
  const doc = bundle([{ id: 'p', spec: { selector: { pathPrefix: '/' }, mode: 'shadow', rules: [llm({ tokens_per_minute: 100 })] } }])
  const obs = new Recorder()
  const engine = new Engine({ store: new MemoryStore({ maxBytes: 1 << 20 }), failPolicy: 'open', observer: obs })
  let d: Decision | undefined
  engine.evaluate(compile(doc), view(chat(500)), T0, false, (x) => (d = x))
  assert.equal(d!.allowed, true)
  assert.deepEqual(
    obs.shadow.map((s) => s.reason),
    ['burst_tokens_exceeded'],
  )
})

test('boundLlmReject leaves other reasons alone', () => {
  const d: Decision = { allowed: false, status: 429, reason: 'kill_switch', mode: 'enforce', retryAfterS: 3600, matchedPolicies: [] }
  assert.equal(boundLlmReject({ ...d }, 3600, 60).status, 429)
  assert.equal(boundLlmReject({ ...d }, 3600, 60).retryAfterS, 3600)
})
