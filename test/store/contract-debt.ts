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

  c.waits('debt: the refill repays it, and a refund (adjust) gives a held request its tokens back', async () => {
    const k = c.key('debt-repay')
    const limit = bucketLimit(5, 1, 2)
    // The refill runs from the first take on, on the store's clock: the client brackets it by c.now()
    // before and after each call (on a driven clock, exactly: 1 − 12 + 5 × 1 s = −6 after the pass).
    // `ms`: Date.now()'s millisecond against the store's finer clock, at 5 tokens/s.
    const ms = c.serverClock ? 5 * 0.002 : 1e-9
    const first = c.now()
    let firstDone = 0
    for (let i = 0; i < 11; i++) {
      assert.equal((await c.apply([debtCheck(k, 1, 5, 2)]))[0]!.allowed, true, `request ${i + 1}`)
      if (i === 0) firstDone = c.now()
    }
    await c.pass(1) // 5 tokens of the 10 owed come back
    const aSent = c.now()
    const [a] = await c.apply([debtCheck(k, 1, 5, 2)])
    const aDone = c.now()
    assert.equal(a!.allowed, true)
    const low = -11 + 5 * (aSent - firstDone)
    const high = -11 + 5 * (aDone - first)
    assert.ok(a!.value >= low - ms && a!.value <= high + ms, `after 1 s: ${a!.value}, refill bracketed to [${low}, ${high}]`)
    await c.adjust([{ key: k, limit, amount: 3 }])
    const [b] = await c.apply([{ ...debtCheck(k, 1, 5, 2), cost: 0 }])
    const bDone = c.now()
    const bHigh = a!.value + 3 + 5 * (bDone - aSent)
    assert.ok(
      b!.value >= a!.value + 3 - 1e-9 && b!.value <= bHigh + ms,
      `after a refund of 3: ${b!.value}, from ${a!.value} (at most ${bHigh})`,
    )
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
