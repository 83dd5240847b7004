/**
 * The in-process stores drop a counter for another key only once its state
 * has expired, on the contract that a kind's `expireAt` is when forgetting the
 * state is lossless. Checked here for every limit kind (so for every
 * algorithm: token_bucket and the LLM minute bucket are token buckets,
 * cost_based budgets, the LLM day counter and loop detection window
 * counters, calendar-month budgets window counters of −1, the circuit breaker
 * a rate meter, sliding_window its own kind, held requests or not): after any sequence of charges
 * and adjustments, a request after the state's expireAt gets exactly what a
 * never-seen key gets. "After" by a microsecond, the tick of every clock the
 * maths reads: the token bucket rounds elapsed time to it, so exactly at
 * expireAt a bucket may still miss rate × 0.5 µs of a token.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import fc from 'fast-check'
import type { Limit, LimitKind, Step } from '../../src/algorithms/algorithm.js'
import { meterLimit } from '../../src/algorithms/kinds/rate-meter/kind.js'
import { slidingLimit } from '../../src/algorithms/kinds/sliding-window/kind.js'
import { bucketLimit } from '../../src/algorithms/kinds/token-bucket/kind.js'
import { counterLimit, SUNDAY_ORIGIN_S } from '../../src/algorithms/kinds/window-counter/kind.js'

const T0 = 1_767_225_600 // 2026-01-01T00:00:00Z

const limits: fc.Arbitrary<Limit> = fc.oneof(
  fc
    .record({ rate: fc.double({ min: 0.001, max: 1000, noNaN: true }), burst: fc.integer({ min: 1, max: 1000 }) })
    .map(({ rate, burst }) => bucketLimit(rate, burst)),
  fc
    .record({
      limit: fc.integer({ min: 1, max: 1000 }),
      windowS: fc.constantFrom(1, 60, 3600, 86_400, 604_800, -1, -3),
      origin: fc.constantFrom(-1, 0, SUNDAY_ORIGIN_S),
    })
    .map(({ limit, windowS, origin }) => counterLimit(limit, windowS, origin)),
  fc
    .record({ threshold: fc.integer({ min: 1, max: 1000 }), openS: fc.integer({ min: 1, max: 3600 }) })
    .map(({ threshold, openS }) => meterLimit(threshold, openS)),
  fc
    .record({
      limit: fc.integer({ min: 1, max: 1000 }),
      windowS: fc.integer({ min: 1, max: 3600 }),
      delayS: fc.oneof(
        fc.constant(0),
        fc.integer({ min: 1, max: 30_000 }).map((ms) => ms / 1000),
      ),
    })
    .map(({ limit, windowS, delayS }) => slidingLimit(limit, windowS, delayS)),
)

/** One request (cost) or adjustment (amount ≠ 0) after `dt` seconds. */
const ops = fc.array(
  fc.record({
    dt: fc.double({ min: 0, max: 200, noNaN: true }),
    cost: fc.integer({ min: 0, max: 50 }),
    adjust: fc.oneof(fc.constant(0), fc.integer({ min: -20, max: 20 })),
  }),
  { minLength: 1, maxLength: 30 },
)

test('for every limit kind, a state past its expireAt decides as a never-seen key does', () => {
  fc.assert(
    fc.property(limits, ops, fc.double({ min: 0, max: 1e5, noNaN: true }), fc.integer({ min: 0, max: 50 }), (limit, seq, later, cost) => {
      const kind = limit.kind as LimitKind
      let now = T0
      let state: unknown
      let expireAt = -Infinity
      for (const op of seq) {
        now += op.dt
        const r: Step<unknown> | undefined =
          op.adjust !== 0 ? kind.adjust(state, limit, op.adjust, now) : kind.step(state, limit, op.cost, now)
        if (r === undefined || (op.adjust === 0 && !r.allowed && r.commit !== true)) continue // nothing written
        state = r.state
        expireAt = r.expireAt
      }
      if (state === undefined) return
      for (const at of [Math.max(now, expireAt + 1e-6), Math.max(now, expireAt + 1e-6) + later]) {
        const kept = kind.step(state, limit, cost, at)
        const fresh = kind.step(undefined, limit, cost, at)
        assert.deepEqual(kept, fresh, `${kind.name} at expireAt + ${at - expireAt} s`)
      }
    }),
    { numRuns: 3000 },
  )
})
