/**
 * A token_bucket_llm rule's `reservation` (docs/llm.md "Reservations"): `max_tokens` reserves
 * the completion asked for, `default` default_max_completion unless asked for less, `pNN` that
 * percentile of the key's recent settled completions (per choice), `default` until the key has
 * MIN_SAMPLES of them. The history's own bounds and nearest-rank percentile.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { bundle, compile, Harness, policy } from '../../helpers/engine-harness.js'
import { CompletionHistory, completionHistory, MIN_SAMPLES, SAMPLES } from '../../../src/llm/completion-history.js'
import { validateBundle } from '../../../src/bundle/validate.js'

test('nearest-rank percentiles of the last SAMPLES completions, none before MIN_SAMPLES', () => {
  const h = new CompletionHistory()
  for (let i = 1; i < MIN_SAMPLES; i++) h.record('k', i)
  assert.equal(h.percentile('k', 90), undefined)
  h.record('k', MIN_SAMPLES)
  assert.equal(h.percentile('k', 50), MIN_SAMPLES / 2)
  assert.equal(h.percentile('k', 99), MIN_SAMPLES)
  // The oldest fall out: SAMPLES values of 1000 leave no trace of 1..8.
  for (let i = 0; i < SAMPLES; i++) h.record('k', 1000)
  assert.equal(h.percentile('k', 1), 1000)
  h.record('k', Number.NaN)
  h.record('k', -5)
  assert.equal(h.percentile('k', 1), 1000, 'nonsense is not recorded')
  assert.equal(h.percentile('other', 50), undefined)
  h.record('x', 2.2)
  for (let i = 0; i < MIN_SAMPLES; i++) h.record('y', 2.2)
  assert.equal(h.percentile('y', 50), 3, 'rounded up')
})

const llm = (extra: object): object => ({
  name: `r${Math.random().toString(36).slice(2)}`,
  limit_keys: ['header:x-key'],
  algorithm: 'token_bucket_llm',
  algorithm_config: { tokens_per_minute: 1_000_000, default_max_completion: 300, ...extra },
})
const req = (maxTokens?: number, n?: number) => ({
  method: 'POST',
  path: '/v1/chat/completions',
  headers: { 'x-key': 'k' },
  body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'abcd' }], max_tokens: maxTokens, n }),
})
const reserved = (h: Harness, maxTokens?: number, n?: number): number => h.run(req(maxTokens, n)).llm![0]!.reserved

test('max_tokens (the default) reserves what is asked; default reserves default_max_completion unless asked for less', () => {
  const m = new Harness(compile(bundle([policy('p', [llm({})])])))
  assert.equal(reserved(m, 2000), 1 + 2000)
  assert.equal(reserved(m), 1 + 300)
  const d = new Harness(compile(bundle([policy('p', [llm({ reservation: 'default' })])])))
  assert.equal(reserved(d, 2000), 1 + 300)
  assert.equal(reserved(d, 100), 1 + 100)
  assert.equal(reserved(d, 2000, 3), 1 + 900, 'per choice')
})

test('pNN reserves that percentile of the key’s settled completions per choice, default before it has enough, never more than asked', () => {
  const rule = llm({ reservation: 'p90' })
  const h = new Harness(compile(bundle([policy('p', [rule])])))
  const key = `tpm:llm:${(rule as { name: string }).name}:k`
  assert.equal(reserved(h, 2000), 1 + 300, 'default until the key has history')
  for (let i = 1; i <= 10; i++) completionHistory.record(key, i * 10)
  assert.equal(reserved(h, 2000), 1 + 90)
  assert.equal(reserved(h, 50), 1 + 50)
  assert.equal(reserved(h, 2000, 2), 1 + 180)
})

test('n multiplies the completion reserved and the size max_tokens_per_request compares, and counts against the burst', () => {
  const h = new Harness(compile(bundle([policy('p', [llm({ max_tokens_per_request: 1000, max_completion_tokens: 200 })])])))
  assert.equal(reserved(h, 100, 5), 1 + 500)
  assert.equal(h.run(req(200, 5)).reason, 'max_tokens_per_request_exceeded', '1 + 5 × 200 > 1000')
  assert.equal(reserved(h, 5000, 4), 1 + 800, 'capped per choice')
  const b = new Harness(compile(bundle([policy('p', [llm({ tokens_per_minute: 1000 })])])))
  assert.equal(b.run(req(300, 4)).reason, 'burst_tokens_exceeded')
})

test('reservation takes max_tokens, default or p1 to p99', () => {
  const doc = (reservation: unknown) => bundle([policy('p', [llm({ reservation })])])
  const errors = (v: unknown): string[] =>
    validateBundle(doc(v), Date.now())
      .filter((i) => i.warning !== true)
      .map((i) => i.message)
  for (const ok of ['max_tokens', 'default', 'p1', 'p50', 'p99']) assert.deepEqual(errors(ok), [], ok)
  for (const bad of ['p0', 'p100', 'p9.5', 'P90', 'mean', 90]) assert.equal(errors(bad).length, 1, String(bad))
})
