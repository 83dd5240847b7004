/**
 * The money fields of a cost_based config (src/algorithms/llm-price.ts): only with
 * `"cost_key": "llm_price"`, amounts in whole micros, and what runs (budget and cap in micros, the
 * cap never above the budget, the reservation's estimator and default).
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { ConfigIssue } from '../../../src/algorithms/algorithm.js'
import { checkMoney, normaliseMoney } from '../../../src/algorithms/llm-price.js'

const issues = (c: Record<string, unknown>): ConfigIssue[] => {
  const out: ConfigIssue[] = []
  checkMoney(c, out)
  return out
}

test('money fields need cost_key llm_price; count fields do not apply to it', () => {
  assert.deepEqual(
    issues({ budget: 5, cost_key: 'header:x', max_cost_per_request: 1, default_max_completion: 10 }).map((i) => i.field),
    ['max_cost_per_request', 'default_max_completion'],
  )
  assert.deepEqual(
    issues({ budget: 5, cost_key: 'llm_price', fixed_cost: 1, min_cost: 1 }).map((i) => i.field),
    ['fixed_cost', 'min_cost'],
  )
  assert.deepEqual(issues({ budget: 5, cost_key: 'llm_price', max_cost_per_request: 0.5 }), [])
})

test('amounts are whole micros and stay exact (below 2^53 micros)', () => {
  assert.deepEqual(
    issues({ budget: 0.0000001, cost_key: 'llm_price', max_cost_per_request: 1e10 }).map((i) => i.message),
    [
      'budget (1e-7) has more than six decimals: money is counted in millionths of the currency',
      'max_cost_per_request (10000000000) must be at most 9007199254',
    ],
  )
})

test('what runs: micros, the cap at most the budget, simple_word and 1000 output tokens by default', () => {
  assert.equal(normaliseMoney({ budget: 5, cost_key: 'fixed' }), undefined)
  assert.deepEqual(normaliseMoney({ budget: 50, cost_key: 'llm_price', max_cost_per_request: 2 }), {
    budgetMicros: 50_000_000,
    money: { estimator: 'simple_word', encoding: 'o200k_base', defaultMaxCompletion: 1000, maxCostMicros: 2_000_000 },
  })
  const m = normaliseMoney({
    budget: 1.5,
    cost_key: 'llm_price',
    max_cost_per_request: 3,
    default_max_completion: 64,
    token_source: { estimator: 'tokenizer', encoding: 'cl100k_base' },
  })
  assert.deepEqual(m?.money, { estimator: 'tokenizer', encoding: 'cl100k_base', defaultMaxCompletion: 64, maxCostMicros: 1_500_000 })
})
