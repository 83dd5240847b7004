/**
 * The semantic checks of llm_prices (src/bundle/validate-prices.ts); the errors, one fixture each,
 * are in validate.test.ts. Here: the warning when the table has no default price, which a bare *
 * also silences, and a money budget in a bundle without a table.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { validateBundle } from '../../../src/bundle/validate.js'

const usd = {
  name: 'usd',
  limit_keys: ['llm:api_key'],
  algorithm: 'cost_based',
  algorithm_config: { budget: 5, period: '1d', cost_key: 'llm_price', staged_actions: [{ threshold_percent: 100, action: 'reject' }] },
}
const doc = (table: object | undefined, rules: object[] = [usd]): object => ({
  bundle_version: 1,
  ...(table ? { llm_prices: { currency: 'USD', per_million_tokens: table } } : {}),
  policies: [{ id: 'p', spec: { selector: { pathPrefix: '/' }, rules, fallback_limit: { ...usd, limit_keys: ['ip:address'] } } }],
})
const NOW = Date.UTC(2026, 0, 1)

test('no default price: a warning (unlisted models are priced at the highest), the bundle loads', () => {
  const issues = validateBundle(doc({ 'gpt-4o*': { input: 2.5, output: 10 } }), NOW)
  assert.deepEqual(issues, [
    {
      pointer: '/llm_prices/per_million_tokens',
      message:
        'per_million_tokens has no "default" price: a model it does not list, or a request whose model cannot be read, is priced at the highest input, cached input and output prices it lists',
      warning: true,
    },
  ])
})

test('a default price, or a bare *: no warning', () => {
  assert.deepEqual(validateBundle(doc({ 'gpt-4o*': { input: 2.5, output: 10 }, default: { input: 5, output: 20 } }), NOW), [])
  assert.deepEqual(validateBundle(doc({ '*': { input: 5, output: 20 } }), NOW), [])
})

test('a money budget without llm_prices: an error at its cost_key, the fallback_limit too', () => {
  assert.deepEqual(
    validateBundle(doc(undefined), NOW).map((i) => i.pointer),
    ['/policies/0/spec/rules/0/algorithm_config/cost_key', '/policies/0/spec/fallback_limit/algorithm_config/cost_key'],
  )
})
