/**
 * The store contract, per limit kind beyond the token bucket: the same table
 * runs on every store (memory with a driven clock, Redis and Redis Cluster on
 * the server's clock, where waits are real and windows are chosen so a
 * boundary cannot fall inside a case).
 */
import assert from 'node:assert/strict'
import { it } from 'node:test'
import { counterLimit } from '../../src/algorithms/kinds/window-counter/kind.js'
import { meterLimit } from '../../src/algorithms/kinds/rate-meter/kind.js'
import { slidingLimit } from '../../src/algorithms/kinds/sliding-window/kind.js'
import { bucketLimit } from '../../src/algorithms/kinds/token-bucket/kind.js'
import { concurrencyCases } from './contract-concurrency.js'
import type { Adjustment, Check, Outcomes, Store } from '../../src/store/store.js'

export interface KindContext {
  store(): Store
  serverClock: boolean
  /** The clock the store is given (the wall clock on a server's clock): the time a request sent now is charged at, which a give-back names. */
  now(): number
  key(label: string): string
  apply(checks: Check[]): Promise<Outcomes>
  adjust(adjustments: Adjustment[]): Promise<void>
  pass(seconds: number): Promise<void>
  /** A case that lets time pass (c.pass): run with the others that do, at once on a server's clock. */
  waits(name: string, fn: () => Promise<void>): void
}

const counter = (key: string, limit: number, windowS: number, origin: number, cost = 1, shadow = false): Check => ({
  key,
  limit: counterLimit(limit, windowS, origin),
  cost,
  shadow,
})
const meter = (key: string, threshold: number, openS: number, cost = 1): Check => ({
  key,
  limit: meterLimit(threshold, openS),
  cost,
  shadow: false,
})

const sliding = (key: string, limit: number, windowS: number, cost = 1): Check => ({
  key,
  limit: slidingLimit(limit, windowS),
  cost,
  shadow: false,
})

/** Epoch seconds of the next 1st of a month, 00:00 UTC, after `now` (s). */
function nextFirst(now: number): number {
  const d = new Date(now * 1000)
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1) / 1000
}

export function kindCases(c: KindContext): void {
  it('window counter: counts up to its limit, then rejects with the seconds left in the window, charging nothing', async () => {
    const k = c.key('wc-limit')
    const values: number[] = []
    for (let i = 0; i < 3; i++) values.push((await c.apply([counter(k, 3, 600, -1)]))[0]!.value)
    assert.deepEqual(values, [1, 2, 3])
    const [r] = await c.apply([counter(k, 3, 600, -1)])
    assert.equal(r!.allowed, false)
    assert.equal(r!.value, 3, 'a reject reports the count without its cost')
    assert.ok(r!.retryAfter >= 599 && r!.retryAfter <= 600, `retry after ${r!.retryAfter}`)
    const [half] = await c.apply([counter(k, 3.5, 600, -1, 0.5)])
    assert.deepEqual([half!.allowed, half!.value], [true, 3.5], 'the rejected request left no increment')
  })

  c.waits('window counter from the first hit: the count starts over when the window has passed', async () => {
    const k = c.key('wc-first')
    await c.apply([counter(k, 2, 1, -1, 2)])
    assert.equal((await c.apply([counter(k, 2, 1, -1)]))[0]!.allowed, false)
    await c.pass(1.2)
    const [o] = await c.apply([counter(k, 2, 1, -1)])
    assert.deepEqual([o!.allowed, o!.value], [true, 1])
  })

  c.waits('window counter aligned to an origin: a new period starts at the boundary, not at the first hit', async () => {
    const k = c.key('wc-aligned')
    const [a] = await c.apply([counter(k, 100, 2, 0, 5)])
    assert.ok(a!.retryAfter >= 1 && a!.retryAfter <= 2, `seconds to the period end: ${a!.retryAfter}`)
    await c.pass(2.05)
    const [b] = await c.apply([counter(k, 100, 2, 0, 1)])
    assert.equal(b!.value, 1, 'the next period starts from zero')
  })

  it('window counter: adjust gives back (never below zero) and charges more', async () => {
    const k = c.key('wc-adjust')
    const l = counterLimit(10, 600, -1)
    await c.apply([counter(k, 10, 600, -1, 6)])
    await c.adjust([{ key: k, limit: l, amount: 4 }])
    assert.equal((await c.apply([counter(k, 10, 600, -1, 0)]))[0]!.value, 2)
    await c.adjust([{ key: k, limit: l, amount: 50 }])
    assert.equal((await c.apply([counter(k, 10, 600, -1, 0)]))[0]!.value, 0)
    await c.adjust([{ key: k, limit: l, amount: -7 }])
    assert.equal((await c.apply([counter(k, 10, 600, -1, 0)]))[0]!.value, 7)
  })

  it('window counter: 200 parallel calls on a limit of 50 → exactly 50, and a rejecting neighbour charges nothing', async () => {
    const k = c.key('wc-conc')
    const results = await Promise.all(Array.from({ length: 200 }, () => c.apply([counter(k, 50, 600, -1)])))
    assert.equal(results.filter((o) => o[0]!.allowed).length, 50)
    const other = c.key('wc-group')
    const tb = c.key('wc-group-tb')
    await c.apply([{ key: tb, limit: bucketLimit(0.001, 1), cost: 1, shadow: false }])
    const r = await c.apply([counter(other, 10, 600, -1), { key: tb, limit: bucketLimit(0.001, 1), cost: 1, shadow: false }])
    assert.deepEqual([r[0]!.allowed, r[1]!.allowed], [true, false])
    assert.equal((await c.apply([counter(other, 10, 600, -1, 0)]))[0]!.value, 0, 'all or nothing: the counter was not charged')
  })

  it('window counter of a calendar month: the wait is the seconds to the next 1st 00:00 UTC; the count starts over then', async () => {
    const k = c.key('wc-month')
    const before = c.now()
    const [a] = await c.apply([counter(k, 2, -1, 0, 2)])
    const after = c.now()
    assert.equal(a!.allowed, true)
    // Whole seconds to the boundary as the store's clock saw it, somewhere between our two readings.
    assert.ok(
      a!.retryAfter >= Math.ceil(nextFirst(before) - after) && a!.retryAfter <= Math.ceil(nextFirst(after) - before),
      `${a!.retryAfter} s to the next 1st (${new Date(nextFirst(after) * 1000).toISOString()})`,
    )
    const [r] = await c.apply([counter(k, 2, -1, 0)])
    assert.deepEqual([r!.allowed, r!.value], [false, 2])
    if (c.serverClock) return // a month cannot pass on a server's clock: the driven clock shows the boundary
    await c.pass(nextFirst(c.now()) - c.now())
    const [b] = await c.apply([counter(k, 2, -1, 0)])
    assert.deepEqual([b!.allowed, b!.value], [true, 1], 'a new month starts from zero')
  })

  it('sliding window: counts up to its limit, then rejects with what is left and the wait for its cost, charging nothing', async () => {
    const k = c.key('sw-limit')
    const left: number[] = []
    for (let i = 0; i < 3; i++) left.push((await c.apply([sliding(k, 3, 600)]))[0]!.value)
    assert.deepEqual(left, [2, 1, 0])
    const [r] = await c.apply([sliding(k, 3, 600)])
    assert.deepEqual([r!.allowed, r!.value], [false, 0])
    // One unit fits once 3 × (1 − e/600) ≤ 2 in the next window: 800 s after the first request.
    assert.ok(r!.retryAfter >= 799 && r!.retryAfter <= 800, `retry after ${r!.retryAfter}`)
    const [half] = await c.apply([sliding(k, 3.5, 600, 0.5)])
    assert.deepEqual([half!.allowed, half!.value], [true, 0], 'the rejected request left no count')
  })

  c.waits('sliding window: the previous window counts by the share of it still inside the sliding window', async () => {
    const k = c.key('sw-slide')
    await c.apply([sliding(k, 4, 2, 4)])
    await c.pass(3) // half into the next window: 4 × ~1/2 still counts
    const [a] = await c.apply([sliding(k, 4, 2, 2)])
    assert.equal(a!.allowed, true)
    assert.ok(a!.value >= -1e-9 && a!.value <= 0.5, `left after 2 more: ${a!.value}`)
    const [b] = await c.apply([sliding(k, 4, 2, 1)])
    assert.equal(b!.allowed, false)
  })

  it('sliding window: adjust gives back and charges more; 200 parallel calls on a limit of 50 → exactly 50', async () => {
    const k = c.key('sw-adjust')
    const l = slidingLimit(10, 600)
    await c.apply([sliding(k, 10, 600, 6)])
    await c.adjust([{ key: k, limit: l, amount: 4 }])
    assert.equal((await c.apply([sliding(k, 10, 600, 0)]))[0]!.value, 8)
    await c.adjust([{ key: k, limit: l, amount: -7 }])
    assert.equal((await c.apply([sliding(k, 10, 600, 0)]))[0]!.value, 1)
    const conc = c.key('sw-conc')
    const results = await Promise.all(Array.from({ length: 200 }, () => c.apply([sliding(conc, 50, 600)])))
    assert.equal(results.filter((o) => o[0]!.allowed).length, 50)
  })

  c.waits('rate meter: opens when the spend per minute reaches the threshold, rejects while open, measures afresh after', async () => {
    const k = c.key('meter')
    const allowed: boolean[] = []
    for (let i = 0; i < 5; i++) allowed.push((await c.apply([meter(k, 5, 1.5)]))[0]!.allowed)
    assert.deepEqual(allowed, [true, true, true, true, false], 'the 5th unit of spend reaches the threshold')
    const [open] = await c.apply([meter(k, 5, 1.5)])
    assert.equal(open!.allowed, false, 'open')
    assert.ok(open!.retryAfter >= 1 && open!.retryAfter <= 2, `retry after ${open!.retryAfter}`)
    await c.pass(1.7)
    const [closed] = await c.apply([meter(k, 5, 1.5)])
    assert.deepEqual([closed!.allowed, closed!.value], [true, 1], 'closed again, spend measured from zero')
  })

  it('rate meter: opening is committed although its group rejects; spend of a rejected group is not', async () => {
    const k = c.key('meter-group')
    const tb = c.key('meter-group-tb')
    const empty = { key: tb, limit: bucketLimit(0.001, 1), cost: 1, shadow: false }
    await c.apply([empty])
    for (let i = 0; i < 3; i++) await c.apply([meter(k, 2, 600), empty]) // rejected by the bucket: no spend recorded
    assert.equal((await c.apply([meter(k, 2, 600)]))[0]!.allowed, true, 'spend of rejected requests did not count')
    const [trip, other] = await c.apply([meter(k, 2, 600), { key: c.key('meter-other'), limit: bucketLimit(1, 5), cost: 1, shadow: false }])
    assert.equal(trip!.allowed, false)
    assert.equal(other, undefined, 'checks after the reject are not evaluated')
    assert.equal((await c.apply([meter(k, 2, 600)]))[0]!.allowed, false, 'the opening was committed')
  })

  concurrencyCases(c)
}
