/**
 * Settling a money budget's reservation (src/llm/spend-settle.ts): on the reported usage priced by
 * kind (OpenAI's cached tokens inside the prompt, Anthropic's cache reads and writes beside it), on
 * a stream's count when it did not end by itself, nothing for an error answer, the reservation for
 * a JSON answer without usage; the adjustment is reserved − used, an overrun capped at the budget.
 */
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import type { SpendReservation } from '../../../src/engine/decision.js'
import { settleSpends, spendOf, type Measured } from '../../../src/llm/spend-settle.js'
import { collectUsage, type Usage } from '../../../src/llm/usage.js'
import type { Adjustment } from '../../../src/store/store.js'

const limit = { kind: {}, params: [] } as unknown as SpendReservation['limit']
// gpt-4o: 2.5 / 1.25 (cached) / 10 USD per million; Anthropic-style cache writes at 3.125.
const r: SpendReservation = {
  policyId: 'p',
  ruleName: 'usd',
  shadow: false,
  key: 'cb:usd:k',
  limit,
  model: 'gpt-4o',
  price: { input: 2_500_000, cachedInput: 1_250_000, cacheWrite: 3_125_000, output: 10_000_000 },
  currency: 'USD',
  prompt: 100,
  completion: 1000,
  reserved: 10_250,
  budget: 1_000_000,
}

const usageOf = (body: object): Usage => {
  const u: Usage = { prompt: undefined, completion: undefined }
  collectUsage(body, u)
  return u
}
const measured = (usage: Usage, o: Partial<Measured> = {}): Measured => ({
  usage,
  counted: undefined,
  complete: true,
  cut: false,
  status: 200,
  ...o,
})

describe('what a call cost', () => {
  test('OpenAI usage: prompt_tokens_details.cached_tokens are inside prompt_tokens, priced as cached input', () => {
    const u = usageOf({ usage: { prompt_tokens: 1200, completion_tokens: 300, prompt_tokens_details: { cached_tokens: 1024 } } })
    const s = spendOf(r, measured(u))
    assert.deepEqual(s.tokens, { input: 176, cachedInput: 1024, cacheWrite: 0, output: 300 })
    assert.equal(s.used, 440 + 1280 + 3000) // 176 × 2.5 + 1024 × 1.25 + 300 × 10
    assert.equal(s.by, 'usage')
  })
  test('the Responses API: input_tokens_details.cached_tokens', () => {
    const u = usageOf({
      type: 'response.completed',
      response: { usage: { input_tokens: 50, output_tokens: 10, input_tokens_details: { cached_tokens: 40 } } },
    })
    assert.deepEqual(spendOf(r, measured(u)).tokens, { input: 10, cachedInput: 40, cacheWrite: 0, output: 10 })
  })
  test('Anthropic: cache reads and writes beside input_tokens, each at its price', () => {
    const u = usageOf({ usage: { input_tokens: 20, cache_creation_input_tokens: 1000, cache_read_input_tokens: 3000, output_tokens: 100 } })
    const s = spendOf(r, measured(u))
    assert.deepEqual(s.tokens, { input: 20, cachedInput: 3000, cacheWrite: 1000, output: 100 })
    assert.equal(s.used, 50 + 3750 + 3125 + 1000)
  })
  test('a stream cut or left: the prompt reported (else estimated) and the larger of counted and reported output', () => {
    const u = usageOf({ usage: { prompt_tokens: 120, completion_tokens: 5 } })
    assert.deepEqual(spendOf(r, measured(u, { counted: 40, cut: true })).tokens, { input: 120, cachedInput: 0, cacheWrite: 0, output: 40 })
    const none: Usage = { prompt: undefined, completion: undefined }
    const s = spendOf(r, measured(none, { counted: 40, complete: false }))
    assert.deepEqual([s.tokens, s.used, s.by], [{ input: 100, cachedInput: 0, cacheWrite: 0, output: 40 }, 250 + 400, 'counted'])
  })
  test('a stream that ended by itself with usage: the usage wins over the count', () => {
    const u = usageOf({ usage: { prompt_tokens: 90, completion_tokens: 60 } })
    assert.equal(spendOf(r, measured(u, { counted: 40 })).by, 'usage')
  })
  test('an error answer, or none at all: nothing; a JSON answer without usage: the reservation', () => {
    const none: Usage = { prompt: undefined, completion: undefined }
    assert.deepEqual([spendOf(r, measured(none, { status: 429 })).used, spendOf(r, measured(none, { status: 0 })).by], [0, 'refunded'])
    assert.deepEqual([spendOf(r, measured(none)).used, spendOf(r, measured(none)).by], [10_250, 'reserved'])
  })
})

describe('the adjustment', () => {
  test('reserved − used: a refund, or an overrun charged', () => {
    const into: Adjustment[] = []
    const u = usageOf({ usage: { prompt_tokens: 100, completion_tokens: 100 } })
    const [s] = settleSpends([r], measured(u), into)
    assert.deepEqual(into, [{ key: 'cb:usd:k', limit, amount: 10_250 - 1250 }])
    assert.equal(s!.capped, false)
    const over: Adjustment[] = []
    settleSpends([r], measured(usageOf({ usage: { prompt_tokens: 100, completion_tokens: 5000 } })), over)
    assert.equal(over[0]!.amount, -(250 + 50_000 - 10_250))
  })
  test('exactly the reservation: no adjustment', () => {
    const into: Adjustment[] = []
    settleSpends([r], measured({ prompt: undefined, completion: undefined }), into)
    assert.deepEqual(into, [])
  })
  test('usage claiming 1e15 tokens is charged the whole budget at most, and said so', () => {
    const into: Adjustment[] = []
    const [s] = settleSpends([r], measured(usageOf({ usage: { prompt_tokens: 1e15, completion_tokens: 1e300 } })), into)
    assert.equal(into[0]!.amount, -1_000_000)
    assert.deepEqual([s!.capped, s!.used], [true, 10_250 + 1_000_000])
  })
})
