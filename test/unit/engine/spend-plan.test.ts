/**
 * A cost_based budget counted in money through the engine and a real in-process store
 * (src/engine/spend-plan.ts): the reservation is priced at the model's price, the budget rejects
 * once the settled spend leaves no room for a reservation, the per-request cap refuses without a
 * store call, a shadow budget only reports, and the settlement (llm/exchange.ts) moves the counter
 * to what the reported usage cost.
 */
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import type { Decision } from '../../../src/engine/decision.js'
import { LlmExchange } from '../../../src/llm/exchange.js'
import type { SpendSettlement } from '../../../src/llm/spend-settle.js'
import { bundle, compile, Harness, policy, T0, type Req } from '../../helpers/engine-harness.js'

const PRICES = {
  currency: 'USD',
  per_million_tokens: {
    'gpt-4o*': { input: 2.5, cached_input: 1.25, output: 10 },
    'gpt-4o-mini*': { input: 0.15, cached_input: 0.075, output: 0.6 },
    default: { input: 15, output: 60 },
  },
}

function usd(budget: number, extra: object = {}, stages: object[] = []): object {
  return {
    name: 'usd',
    limit_keys: ['llm:api_key'],
    algorithm: 'cost_based',
    algorithm_config: {
      budget,
      period: '1d',
      cost_key: 'llm_price',
      staged_actions: [...stages, { threshold_percent: 100, action: 'reject' }],
      ...extra,
    },
  }
}

const harness = (rules: object[], mode = 'enforce'): Harness =>
  new Harness(compile(bundle([policy('p', rules, { mode }, { pathPrefix: '/' })], { llm_prices: PRICES })))

/** A chat call of `chars` characters of prompt (simple_word: chars / 4 tokens). */
function chat(model: string, chars: number, maxTokens?: number, path = '/v1/chat/completions', key = 'k'): Req {
  const body = { model, messages: [{ role: 'user', content: 'x'.repeat(chars) }], ...(maxTokens ? { max_tokens: maxTokens } : {}) }
  return { method: 'POST', path, headers: { authorization: `Bearer ${key}` }, body: JSON.stringify(body) }
}

/** Settles `d`'s reservations on a JSON answer reporting `usage`, in the harness's store. */
function settle(h: Harness, d: Decision, usage: object | undefined, status = 200): SpendSettlement[] {
  let out: SpendSettlement[] = []
  const x = new LlmExchange(
    d.llm ?? [],
    {
      store: h.store,
      now: () => T0 / 1000,
      settled: () => undefined,
      dropped: () => assert.fail('the memory store takes every adjustment'),
      wouldTruncate: () => undefined,
      truncated: () => undefined,
      spendSettled: (s) => void (out = s),
    },
    undefined,
    d.spend,
  )
  x.headers(status, 'application/json', undefined)
  x.data(Buffer.from(JSON.stringify({ id: 'c', ...(usage ? { usage } : {}) })))
  x.end(true)
  return out
}

describe('the reservation', () => {
  test("the prompt estimate at the model's input price plus max_tokens at its output price, in micros", () => {
    const h = harness([usd(50)])
    const d = h.run(chat('gpt-4o-2024-08-06', 400, 1000))
    const r = d.spend?.[0]
    assert.deepEqual([r?.model, r?.prompt, r?.completion, r?.reserved, r?.currency], ['gpt-4o-2024-08-06', 100, 1000, 250 + 10_000, 'USD'])
    assert.deepEqual([d.limit?.limit, d.limit?.remaining], [50_000_000, 50_000_000 - 10_250], 'RateLimit-* in micros')
  })
  test('no max_tokens: default_max_completion (1000 unless set)', () => {
    const h = harness([usd(50, { default_max_completion: 200 })])
    assert.equal(h.run(chat('gpt-4o-mini', 400)).spend?.[0]?.reserved, 15 + 120)
  })
  test('a model the table does not list, or none read, costs the default price', () => {
    const h = harness([usd(50)])
    assert.equal(h.run(chat('o3-pro', 400, 100)).spend?.[0]?.reserved, 1500 + 6000)
    const noModel = { method: 'POST', path: '/v1/chat/completions', headers: { authorization: 'Bearer k' }, body: '{"messages":[]}' }
    assert.equal(h.run(noModel).spend?.[0]?.model, undefined)
  })
  test('Azure: the deployment of the path is priced, not the cheaper model the body names', () => {
    const h = harness([usd(50)])
    const d = h.run(chat('gpt-4o-mini', 400, 1000, '/openai/deployments/gpt-4o/chat/completions'))
    assert.deepEqual([d.spend?.[0]?.model, d.spend?.[0]?.reserved], ['gpt-4o', 10_250])
  })
  test('a body naming two models is refused 400, nothing charged', () => {
    const h = harness([usd(50)])
    const d = h.run({
      method: 'POST',
      path: '/v1/chat/completions',
      headers: { authorization: 'Bearer k' },
      body: '{"model":"gpt-4o-mini","model":"gpt-4o"}',
    })
    assert.deepEqual([d.status, d.reason, d.spend], [400, 'ambiguous_request', undefined])
  })
})

describe('the per-request cap', () => {
  test('a reservation above max_cost_per_request is refused without a store call', () => {
    const h = harness([usd(50, { max_cost_per_request: 2 })])
    // 100 × 15 + 40000 × 60 = 2.4015 USD at the default price.
    const d = h.run(chat('o1', 400, 40_000))
    assert.deepEqual([d.allowed, d.status, d.reason, d.spend, d.limit], [false, 400, 'cost_per_request_exceeded', undefined, undefined])
    assert.equal(h.run(chat('o1', 400, 30_000)).allowed, true, '1.8015 USD passes')
    assert.equal(h.run(chat('gpt-4o', 400, 100_000)).allowed, true, '1.00025 USD at gpt-4o prices passes')
  })
  test('a reservation above the whole budget could never pass: refused the same way', () => {
    const h = harness([usd(1)])
    assert.equal(h.run(chat('o1', 400, 20_000)).reason, 'cost_per_request_exceeded')
  })
  test('in a shadow policy it is only reported', () => {
    const h = harness([usd(50, { max_cost_per_request: 2 })], 'shadow')
    const d = h.run(chat('o1', 400, 40_000))
    assert.equal(d.allowed, true)
    assert.deepEqual(
      h.obs.shadow.map((s) => s.reason),
      ['cost_per_request_exceeded'],
    )
  })
})

describe('the budget, settled on the reported usage', () => {
  test('rejects when the settled spend leaves no room for the next reservation; the next period starts afresh', () => {
    const h = harness([usd(0.01, {}, [{ threshold_percent: 50, action: 'warn' }])])
    // Each call reserves 250 + 1000 = 1250 micros and uses 100 prompt + 300 output tokens: 250 + 3000 = 3250 micros.
    const spent: number[] = []
    for (let i = 0; i < 3; i++) {
      const d = h.run(chat('gpt-4o', 400, 100))
      assert.equal(d.allowed, true, `call ${i + 1}`)
      spent.push(settle(h, d, { prompt_tokens: 100, completion_tokens: 300 })[0]!.used)
    }
    assert.deepEqual(spent, [3250, 3250, 3250])
    // 9750 of 10000 spent: a reservation of 1250 no longer fits.
    const d = h.run(chat('gpt-4o', 400, 100))
    assert.deepEqual([d.reason, d.limit?.remaining], ['budget_exceeded', 0])
    // The day ends later than FAIRVISOR_LLM_MAX_RETRY_AFTER: a 403 no client retries, saying when it resets.
    assert.equal(d.status, 403)
    assert.match(d.message ?? '', /^Rate limit reached for the budget in money\. It resets in \d+ s/)
    const small = h.run(chat('gpt-4o-mini', 400, 100))
    assert.deepEqual([small.allowed, small.warning, small.limit?.remaining], [true, 'budget_warn', 10_000 - 9750 - 75])
    assert.equal(h.run(chat('gpt-4o', 400, 100), 86_400).allowed, true, 'a new UTC day')
  })
  test('an error answer gives the reservation back; a JSON answer without usage keeps it', () => {
    const h = harness([usd(50)])
    const a = h.run(chat('gpt-4o', 400, 1000))
    assert.equal(settle(h, a, undefined, 500)[0]!.by, 'refunded')
    assert.equal(
      h.run(chat('gpt-4o', 4, 1)).limit?.remaining,
      50_000_000 - 13,
      'nothing spent but the next reservation (2.5 + 10 micros, rounded up)',
    )
    const b = h.run(chat('gpt-4o', 400, 1000))
    assert.equal(settle(h, b, undefined)[0]!.by, 'reserved')
  })
  test('keyed on llm:model too: each model its own budget, a match on llm:model compared lower-cased', () => {
    const perModel = { ...usd(0.001), limit_keys: ['llm:api_key', 'llm:model'] } as Record<string, unknown>
    const onlyMini = { ...usd(0.000_1), name: 'mini', match: { 'llm:model': 'GPT-4o-mini' } }
    const h = harness([perModel, onlyMini])
    const d = h.run(chat('gpt-4o', 400, 10))
    assert.deepEqual(
      d.spend?.map((s) => s.key),
      ['cb:usd:k|gpt-4o'],
    )
    const m = h.run(chat('GPT-4O-MINI', 400, 10))
    assert.deepEqual(
      m.spend?.map((s) => s.key),
      ['cb:usd:k|gpt-4o-mini', 'cb:mini:k'],
    )
  })
})
