/**
 * The LLM parts of compiled rules (src/bundle/compile-llm.ts): which policies have their body
 * read before the decision (an LLM rule, a money budget, llm:model as a key or a match), match
 * values on llm:model lower-cased, and a money budget carrying the bundle's prices.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { expectedValue, llmParts, readsBody } from '../../../src/bundle/compile-llm.js'
import { COST_BUDGET } from '../../../src/algorithms/cost-budget.js'
import { bundle, compile, policy, rule, tb } from '../../helpers/engine-harness.js'

const prices = { currency: 'USD', per_million_tokens: { default: { input: 1, output: 2 } } }

test('a policy reads the body when a rule keys or matches on llm:model, or counts money; not otherwise', () => {
  const b = compile(
    bundle(
      [
        policy('keyed', [rule('per_model', ['llm:model'], tb(1, 10))]),
        policy('matched', [rule('mini', ['ip:address'], tb(1, 10), { match: { 'llm:model': 'GPT-4o-Mini' } })]),
        policy('money', [
          {
            name: 'usd',
            limit_keys: ['ip:address'],
            algorithm: 'cost_based',
            algorithm_config: {
              budget: 5,
              period: '1d',
              cost_key: 'llm_price',
              staged_actions: [{ threshold_percent: 100, action: 'reject' }],
            },
          },
        ]),
        policy('plain', [rule('per_ip', ['ip:address'], tb(1, 10))]),
      ],
      { llm_prices: prices },
    ),
  )
  assert.deepEqual(
    b.policies.map((p) => [p.id, p.llm]),
    [
      ['keyed', true],
      ['matched', true],
      ['money', true],
      ['plain', false],
    ],
  )
  assert.equal(b.llm, true)
  assert.equal(b.policies[1]!.rules[0]!.match[0]!.expected, 'gpt-4o-mini')
  assert.equal(b.policies[2]!.rules[0]!.spend?.prices.currency, 'USD')
})

test('expectedValue lower-cases llm:model values only', () => {
  assert.deepEqual(
    [expectedValue('llm:model', 'GPT-4o'), expectedValue('header:x', 'ABC'), expectedValue('jwt:n', 3)],
    ['gpt-4o', 'ABC', '3'],
  )
})

test('a money budget without prices is not supported (validation refuses it before)', () => {
  const limit = COST_BUDGET.normalise({ budget: 5, period: '1d', cost_key: 'llm_price', staged_actions: [] })
  assert.deepEqual(llmParts(COST_BUDGET, limit, 'usd', undefined), { supported: false })
  assert.equal(readsBody({ keyNames: [], match: [] }), false)
})
