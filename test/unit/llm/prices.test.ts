/**
 * The price table (src/llm/prices.ts): amounts in integer micros, a call's cost rounded up once
 * and summed without float drift, and which price a model name gets (exact, longest prefix,
 * default, else the table's highest).
 */
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { compilePrices, costMicros, formatMicros, prefixOf, toMicros, type ModelPrice } from '../../../src/llm/prices.js'

describe('toMicros and formatMicros', () => {
  test('decimals up to six are whole micros, exactly', () => {
    assert.deepEqual(
      [0.15, 2.5, 0.075, 0.000001, 50, 1234.567891].map(toMicros),
      [150_000, 2_500_000, 75_000, 1, 50_000_000, 1_234_567_891],
    )
  })
  test('a seventh decimal is a fraction of a micro: refused', () => {
    assert.equal(toMicros(0.0000001), undefined)
    assert.equal(toMicros(2.5000005), undefined)
  })
  test('micros print as the currency with the zeros dropped', () => {
    assert.deepEqual([1_500_000, 50_000_000, 1, 10_250, 0, -2_000_000].map(formatMicros), ['1.5', '50', '0.000001', '0.01025', '0', '-2'])
  })
})

const gpt4o: ModelPrice = { input: 2_500_000, cachedInput: 1_250_000, cacheWrite: 2_500_000, output: 10_000_000 }
const mini: ModelPrice = { input: 150_000, cachedInput: 75_000, cacheWrite: 150_000, output: 600_000 }
const none = { input: 0, cachedInput: 0, cacheWrite: 0, output: 0 }

describe('costMicros', () => {
  test('each kind of token at its price, per million', () => {
    // 1000 input × 2.5 + 500 cached × 1.25 + 200 output × 10 (USD per million) = 0.0025 + 0.000625 + 0.002 USD.
    assert.equal(costMicros(gpt4o, { ...none, input: 1000, cachedInput: 500, output: 200 }), 2500 + 625 + 2000)
  })
  test('a fraction of a micro is rounded up once per call, on the sum', () => {
    // 7 × 0.15 = 1.05 micros and 3 × 0.6 = 1.8: 2.85 → 3, not ceil(1.05) + ceil(1.8) = 4.
    assert.equal(costMicros(mini, { ...none, input: 7, output: 3 }), 3)
    assert.equal(costMicros(mini, { ...none, input: 1 }), 1, 'never below what the provider bills')
    assert.equal(costMicros(mini, none), 0)
  })
  test('a fraction of a token is billed as a whole one; a count that is no number costs nothing', () => {
    assert.equal(costMicros(gpt4o, { ...none, output: 0.5 }), 10)
    assert.equal(costMicros(gpt4o, { ...none, output: Number.NaN, input: -5 }), 0)
  })
  test('no drift: a million calls of 7 tokens add up to the invoice, where floats do not', () => {
    const per = costMicros(mini, { ...none, input: 7, output: 7 }) // 7 × 0.75 = 5.25 → 6 micros
    let micros = 0
    let dollars = 0
    for (let i = 0; i < 1_000_000; i++) {
      micros += per
      dollars += per / 1_000_000
    }
    assert.equal(micros, 6_000_000)
    assert.notEqual(dollars, 6, 'the same sum in floats has drifted')
  })
  test('large counts stay exact (BigInt), beyond 2^53 before the division', () => {
    const p: ModelPrice = { ...none, output: 999_999_999_999 }
    assert.equal(costMicros(p, { ...none, output: 10_000_000 }), 9_999_999_999_990)
  })
})

describe('priceOf', () => {
  const table = compilePrices({
    currency: 'USD',
    per_million_tokens: {
      'gpt-4o*': { input: 2.5, cached_input: 1.25, output: 10 },
      'gpt-4o-mini*': { input: 0.15, cached_input: 0.075, output: 0.6 },
      'gpt-4o-mini-tts': { input: 0.6, output: 12 },
      'claude-sonnet-4*': { input: 3, cached_input: 0.3, cache_write_input: 3.75, output: 15 },
      default: { input: 30, output: 60 },
    },
  })
  test('an exact name beats every prefix; the longest prefix beats a shorter one', () => {
    assert.equal(table.priceOf('gpt-4o-mini-tts').output, 12_000_000)
    assert.equal(table.priceOf('gpt-4o-mini-2024-07-18').input, 150_000)
    assert.equal(table.priceOf('gpt-4o-2024-08-06').input, 2_500_000)
    assert.equal(table.priceOf('gpt-4o').input, 2_500_000, 'a prefix takes its own name')
  })
  test('cached input and cache writes default to the input price', () => {
    assert.deepEqual(table.priceOf('gpt-4o-mini-tts'), { input: 600_000, cachedInput: 600_000, cacheWrite: 600_000, output: 12_000_000 })
    assert.equal(table.priceOf('claude-sonnet-4-5').cacheWrite, 3_750_000)
  })
  test('any other model, or none read, is priced at default', () => {
    assert.equal(table.priceOf('o3-pro').input, 30_000_000)
    assert.equal(table.priceOf(undefined).output, 60_000_000)
  })
  test('names are compared lower-cased (llm:model is lower case)', () => {
    const t = compilePrices({ currency: 'EUR', per_million_tokens: { 'Mistral-Large*': { input: 2, output: 6 } } })
    assert.equal(t.priceOf('mistral-large-latest').input, 2_000_000)
    assert.equal(t.currency, 'EUR')
  })
  test('without default, an unlisted model costs the highest price of each kind the table lists', () => {
    const t = compilePrices({
      currency: 'USD',
      per_million_tokens: {
        a: { input: 1, cached_input: 0.5, output: 20 },
        b: { input: 5, output: 8 },
      },
    })
    assert.deepEqual(t.priceOf('unknown'), { input: 5_000_000, cachedInput: 5_000_000, cacheWrite: 5_000_000, output: 20_000_000 })
    assert.deepEqual(t.priceOf(undefined), t.priceOf('unknown'))
  })
  test('a bare * takes every name, and a request whose model cannot be read', () => {
    const t = compilePrices({ currency: 'USD', per_million_tokens: { '*': { input: 1, output: 2 }, x: { input: 9, output: 9 } } })
    assert.equal(t.priceOf('anything').input, 1_000_000)
    assert.equal(t.priceOf(undefined).input, 1_000_000)
  })
  test('prefixOf', () => {
    assert.deepEqual([prefixOf('gpt-4o*'), prefixOf('gpt-4o'), prefixOf('*')], ['gpt-4o', undefined, ''])
  })
})
