/**
 * The store contract for a sliding window with a delay (`max_delay_ms`): the
 * same cases on every store. Past its limit a request that fits within the
 * delay is allowed below zero and counted for the window it will be
 * forwarded in, so later ones queue behind it; nothing is held past the end
 * of the next window; a give-back frees the place; the charge is decided
 * atomically with the request's other checks. Windows of 600 s with nothing
 * in the previous one: the estimate does not move between calls, so every
 * figure is exact on a server's clock too, and a wait is exact to the time
 * the calls took.
 */
import assert from 'node:assert/strict'
import { it } from 'node:test'
import { slidingLimit } from '../../src/algorithms/kinds/sliding-window/kind.js'
import { bucketLimit } from '../../src/algorithms/kinds/token-bucket/kind.js'
import type { Check } from '../../src/store/store.js'
import type { KindContext } from './contract-kinds.js'

/** 5 per 600 s, held up to 1300 s: the first five pass, the next four are held until 720, 840, 960, 1080 s. */
const held = (key: string, cost = 1): Check => ({ key, limit: slidingLimit(5, 600, 1300), cost, shadow: false })

export function slidingDelayCases(c: KindContext): void {
  /** Seconds the calls of one case may take on a server's clock. */
  const slack = c.serverClock ? 3 : 1e-9

  it('sliding window delay: past the limit each request is allowed below zero, held until it fits behind the others, up to the end of the next window', async () => {
    const k = c.key('sw-delay')
    const seen: [boolean, number][] = []
    const waits: number[] = []
    for (let i = 0; i < 9; i++) {
      const [o] = await c.apply([held(k)])
      seen.push([o!.allowed, o!.value])
      waits.push(o!.retryAfter)
    }
    assert.deepEqual(seen, [
      [true, 4],
      [true, 3],
      [true, 2],
      [true, 1],
      [true, 0],
      [true, -1],
      [true, -2],
      [true, -3],
      [true, -4],
    ])
    // The window's five leave the next one evenly: 4, 3, 2, 1 left of them (and the held before it) at 720 … 1080 s.
    for (const [i, at] of [720, 840, 960, 1080].entries()) {
      const w = waits[5 + i]!
      assert.ok(w <= at + 1e-9 && w >= at - slack, `request ${6 + i} held ${w} s`)
    }
    const [r] = await c.apply([held(k)])
    assert.deepEqual([r!.allowed, r!.value], [false, -4], 'the 10th fits only at the end of the next window: refused, nothing counted')
    assert.ok(r!.retryAfter >= 600 - slack && r!.retryAfter <= 600, `held once the window has turned: ${r!.retryAfter}`)
    const [big] = await c.apply([held(c.key('sw-delay-big'), 6)])
    assert.deepEqual([big!.allowed, big!.value], [false, 5], 'a cost above the limit is never held')
  })

  it('sliding window delay: a held request given back frees its place for the next one; a plain give-back comes off this window', async () => {
    const k = c.key('sw-delay-back')
    const limit = held(k).limit
    for (let i = 0; i < 5; i++) await c.apply([held(k)])
    const [h] = await c.apply([held(k)])
    // Given back as the gateway gives back a held request: the kind's give-back limit names the window it was counted for.
    await c.adjust([{ key: k, limit: limit.kind.giveBack!(limit, h!, 0)!, amount: 1 }])
    const [o] = await c.apply([held(k)])
    assert.deepEqual([o!.allowed, o!.value], [true, -1])
    assert.ok(o!.retryAfter <= 720 + 1e-9 && o!.retryAfter >= 720 - slack, `held in its place, until 720 s: ${o!.retryAfter}`)
    // A plain give-back (a refund by status) comes off this window's count, never below the truth: 4 now, 1 next, and
    // one more fits once 4 × (1 − e) + 1 ≤ 4, at 750 s.
    await c.adjust([{ key: k, limit, amount: 1 }])
    const [p] = await c.apply([held(k)])
    assert.deepEqual([p!.allowed, p!.value], [true, -1])
    assert.ok(p!.retryAfter <= 750 + 1e-9 && p!.retryAfter >= 750 - slack, `held until 750 s: ${p!.retryAfter}`)
  })

  it('sliding window delay: 40 parallel calls on 5 per 600 s → exactly 9 allowed, 4 of them held', async () => {
    const k = c.key('sw-delay-conc')
    const results = await Promise.all(Array.from({ length: 40 }, () => c.apply([held(k)])))
    const allowed = results.filter(([o]) => o!.allowed)
    assert.equal(allowed.length, 9)
    assert.deepEqual(
      allowed.map(([o]) => o!.value).sort((a, b) => a - b),
      [-4, -3, -2, -1, 0, 1, 2, 3, 4],
    )
  })

  it('sliding window delay: all or nothing with the request’s other checks — a reject elsewhere leaves nothing held', async () => {
    const k = c.key('sw-delay-group')
    const full = c.key('sw-delay-group-full')
    await c.apply([{ key: full, limit: bucketLimit(0.001, 1), cost: 1, shadow: false }])
    await c.apply([held(k, 5)])
    const r = await c.apply([held(k), held(k), { key: full, limit: bucketLimit(0.001, 1), cost: 1, shadow: false }])
    assert.deepEqual(
      r.map((o) => o?.allowed),
      [true, true, false],
    )
    assert.deepEqual([r[0]!.value, r[1]!.value], [-1, -2], 'the second check saw the first one held')
    const [after] = await c.apply([held(k, 0)])
    assert.deepEqual([after!.allowed, after!.value], [true, 0], 'nothing committed')
    // Taken back from the window they were counted for (a Redis Cluster refunds the slot that committed them): the next is held until 720 s.
    const [next] = await c.apply([held(k)])
    assert.deepEqual([next!.allowed, next!.value], [true, -1])
    assert.ok(next!.retryAfter <= 720 + 1e-9 && next!.retryAfter >= 720 - slack, `held ${next!.retryAfter} s`)
  })
}
