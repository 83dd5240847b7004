/**
 * The store contract for a token bucket with debt (`max_delay_ms`): the same
 * cases on every store. A request whose tokens arrive within the limit's
 * longest wait is allowed and leaves the bucket below zero; the debt is
 * bounded, repaid by the refill, given back by an adjustment, and decided
 * atomically with the request's other checks. Rates are low where the
 * stores read their own clock, so the few milliseconds between calls refill
 * next to nothing.
 */
import assert from 'node:assert/strict'
import { it } from 'node:test'
import { bucketLimit } from '../../src/algorithms/kinds/token-bucket/kind.js'
import type { Check } from '../../src/store/store.js'
import type { KindContext } from './contract-kinds.js'

const debtCheck = (key: string, burst: number, rate: number, maxDelayS: number, cost = 1): Check => ({
  key,
  limit: bucketLimit(rate, burst, maxDelayS),
  cost,
  shadow: false,
})

export function debtCases(c: KindContext): void {
  /** Refill the server clock may add between two calls of one case (at most 2 s of calls at `rate`). */
  const slack = (rate: number): number => (c.serverClock ? rate * 2 : 1e-9)

  it('debt: requests are allowed below zero until the debt would pass rate × longest wait, then rejected with the wait left', async () => {
    const k = c.key('debt')
    const values: number[] = []
    for (let i = 0; i < 5; i++) {
      const [o] = await c.apply([debtCheck(k, 1, 0.01, 400)]) // debt up to 0.01 × 400 = 4 tokens
      assert.equal(o!.allowed, true, `request ${i + 1}`)
      values.push(o!.value)
    }
    for (const [i, v] of values.entries()) assert.ok(v >= -i - 1e-9 && v <= -i + slack(0.01), `request ${i + 1} left ${v}`)
    const [r] = await c.apply([debtCheck(k, 1, 0.01, 400)])
    assert.equal(r!.allowed, false, 'a sixth unit of debt is past the bound')
    assert.ok(Math.abs(r!.value + 4) <= slack(0.01), `a reject reports the bucket unchanged: ${r!.value}`)
    // The request could pass once the bucket is back at −3: 1 token at 0.01/s = 100 s.
    assert.ok(r!.retryAfter >= 99 && r!.retryAfter <= 100, `retry after ${r!.retryAfter}`)
  })

  it('debt: a cost above burst is rejected whatever the debt allowed', async () => {
    const k = c.key('debt-over')
    const [r] = await c.apply([debtCheck(k, 2, 1, 60, 3)])
    assert.equal(r!.allowed, false)
    assert.equal(r!.value, 2)
  })

  it('debt: the refill repays it, and a refund (adjust) gives a held request its tokens back', async () => {
    const k = c.key('debt-repay')
    const limit = bucketLimit(5, 1, 2)
    for (let i = 0; i < 11; i++) assert.equal((await c.apply([debtCheck(k, 1, 5, 2)]))[0]!.allowed, true, `request ${i + 1}`)
    await c.pass(1) // 5 tokens of the 10 owed come back
    const [a] = await c.apply([debtCheck(k, 1, 5, 2)])
    assert.equal(a!.allowed, true)
    assert.ok(a!.value >= -6 - 1e-9 && a!.value <= -6 + (c.serverClock ? 5 * 0.3 : 1e-9), `after 1 s: ${a!.value}`)
    await c.adjust([{ key: k, limit, amount: 3 }])
    const [b] = await c.apply([{ ...debtCheck(k, 1, 5, 2), cost: 0 }])
    assert.ok(b!.value >= -3 - 1e-9 && b!.value <= -3 + (c.serverClock ? 5 * 0.6 : 1e-9), `after a refund of 3: ${b!.value}`)
  })

  it('debt: 40 parallel calls on burst 1 and a debt of 10 tokens → exactly 11 allowed', async () => {
    const k = c.key('debt-conc')
    const results = await Promise.all(Array.from({ length: 40 }, () => c.apply([debtCheck(k, 1, 0.01, 1000)])))
    assert.equal(results.filter(([o]) => o!.allowed).length, 11)
    const lowest = Math.min(...results.map(([o]) => o!.value))
    assert.ok(lowest >= -10 - 1e-9, `never below the bound: ${lowest}`)
  })

  it('debt: all or nothing with the request’s other checks — a reject elsewhere leaves no debt', async () => {
    const k = c.key('debt-group')
    const full = c.key('debt-group-full')
    await c.apply([{ key: full, limit: bucketLimit(0.001, 1), cost: 1, shadow: false }])
    const r = await c.apply([
      debtCheck(k, 1, 0.01, 1000, 1),
      debtCheck(k, 1, 0.01, 1000, 1),
      { key: full, limit: bucketLimit(0.001, 1), cost: 1, shadow: false },
    ])
    assert.deepEqual(
      r.map((o) => o?.allowed),
      [true, true, false],
    )
    assert.ok(Math.abs(r[1]!.value + 1) <= slack(0.01), `the second check saw the first one's debt: ${r[1]!.value}`)
    const [after] = await c.apply([{ ...debtCheck(k, 1, 0.01, 1000), cost: 0 }])
    assert.ok(Math.abs(after!.value - 1) <= 1e-9, `nothing committed: ${after!.value}`)
  })
}
