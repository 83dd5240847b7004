/**
 * The sliding window's maths (kind.ts): the worked example of
 * docs/algorithms.md, how windows follow one another, the wait it answers
 * (never earlier than the moment the request could pass, and not a second
 * later), the error bound the docs state, and a steady stream against a
 * fixed window. Times are epoch seconds as the engine passes them.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import fc from 'fast-check'
import { SLIDING_WINDOW_KIND as K, slidingLimit, type SlidingState } from '../../../../../src/algorithms/kinds/sliding-window/kind.js'
import { counterLimit, WINDOW_COUNTER_KIND } from '../../../../../src/algorithms/kinds/window-counter/kind.js'

const T0 = 1_767_225_600 // 2026-01-01T00:00:00Z

test('the worked example of docs/algorithms.md: 84 last minute, 36 this one, a quarter in', () => {
  const l = slidingLimit(100, 60)
  const s: SlidingState = { prev: 84, cur: 36, start: T0 + 60, next: 0 }
  const now = T0 + 75
  const a = K.step(s, l, 1, now)
  // 84 × (1 − 15/60) + 36 = 99: one more fits; the next unit once 84 × (1 − e/60) + 37 ≤ 99, e ≥ 15.71 s.
  assert.deepEqual(a, { allowed: true, value: 0, retryAfter: 1, state: { prev: 84, cur: 37, start: T0 + 60, next: 0 }, expireAt: T0 + 180 })
  const b = K.step(a.state, l, 10, now)
  // 84 × (1 − e/60) + 37 ≤ 90 from e = 22.14 s: 7.14 s from now, so 8.
  assert.deepEqual([b.allowed, b.value, b.retryAfter], [false, 0, 8])
  assert.equal(K.step(a.state, l, 10, now + 8).allowed, true)
  assert.equal(K.step(a.state, l, 10, now + 7).allowed, false)
})

test('windows follow one another from the first request: the current count becomes the previous, two windows on nothing counts', () => {
  const l = slidingLimit(10, 10)
  const first = K.step(undefined, l, 4, T0 + 3.25)
  assert.deepEqual(first.state, { prev: 0, cur: 4, start: T0 + 3.25, next: 0 }, 'the window starts at the first request, not on the clock')
  assert.equal(first.expireAt, T0 + 23.25)
  const next = K.step(first.state, l, 1, T0 + 15.75) // a quarter into the next window: 4 × 0.75 + 0 + 1
  assert.deepEqual([next.value, next.state], [6, { prev: 4, cur: 1, start: T0 + 13.25, next: 0 }])
  const later = K.step(next.state, l, 1, T0 + 25.25)
  assert.deepEqual(later.state, { prev: 1, cur: 1, start: T0 + 23.25, next: 0 })
  const quiet = K.step(later.state, l, 1, T0 + 50)
  assert.deepEqual(
    quiet.state,
    { prev: 0, cur: 1, start: T0 + 50, next: 0 },
    'two windows on nothing counts: the request starts a new window',
  )
})

test('a reject charges nothing, reports what is left and the wait for its cost; a cost above the limit waits for the window to empty', () => {
  const l = slidingLimit(5, 10)
  const full = K.step(undefined, l, 5, T0)
  assert.deepEqual([full.value, full.retryAfter], [0, 12], 'the next unit fits when 5 × (1 − e/10) ≤ 4 in the next window: 12 s')
  const r = K.step(full.state, l, 2, T0 + 1)
  // 2 fits when 5 × (1 − e/10) ≤ 3 in the next window: at T0 + 14.
  assert.deepEqual([r.allowed, r.value, r.retryAfter, r.state], [false, 0, 13, full.state])
  const huge = K.step(full.state, l, 6, T0 + 1)
  assert.deepEqual([huge.allowed, huge.retryAfter], [false, 19])
})

test('adjust gives back from the current count, the rest from the previous one, never below zero; charges on top; nothing counted: nothing to do', () => {
  const l = slidingLimit(10, 10)
  const s: SlidingState = { prev: 6, cur: 2, start: T0, next: 0 }
  assert.deepEqual(K.adjust(s, l, 3, T0 + 5)!.state, { prev: 5, cur: 0, start: T0, next: 0 })
  assert.deepEqual(K.adjust(s, l, 50, T0 + 5)!.state, { prev: 0, cur: 0, start: T0, next: 0 })
  assert.deepEqual(K.adjust(s, l, -4, T0 + 5)!.state, { prev: 6, cur: 6, start: T0, next: 0 })
  assert.equal(K.adjust(undefined, l, 1, T0), undefined)
  assert.deepEqual(K.adjust(undefined, l, -2, T0)!.state, { prev: 0, cur: 2, start: T0, next: 0 })
})

/** A history of requests (seconds apart, costs) from a quiet key, as the store keeps it. */
const history = fc.array(fc.record({ dt: fc.double({ min: 0, max: 25, noNaN: true }), cost: fc.integer({ min: 1, max: 4 }) }), {
  maxLength: 30,
})
const limits = fc.record({ limit: fc.integer({ min: 1, max: 40 }), windowS: fc.integer({ min: 1, max: 20 }) })

function replay(l: ReturnType<typeof slidingLimit>, h: { dt: number; cost: number }[]): { state: SlidingState | undefined; now: number } {
  let state: SlidingState | undefined
  let now = T0
  for (const r of h) {
    now += r.dt
    const s = K.step(state, l, r.cost, now)
    if (s.allowed) state = s.state
  }
  return { state, now }
}

test('Retry-After of a reject is the first whole second at which the request passes: not earlier, not a second later', () => {
  fc.assert(
    fc.property(
      limits,
      history,
      fc.integer({ min: 1, max: 45 }),
      fc.double({ min: 0, max: 3, noNaN: true }),
      ({ limit, windowS }, h, cost, dt) => {
        const l = slidingLimit(limit, windowS)
        const { state, now: before } = replay(l, h)
        const now = before + dt
        const r = K.step(state, l, cost, now)
        if (r.allowed || cost > limit) return
        assert.equal(K.step(state, l, cost, now + r.retryAfter).allowed, true, `passes after ${r.retryAfter} s`)
        if (r.retryAfter > 1) assert.equal(K.step(state, l, cost, now + r.retryAfter - 1).allowed, false, `not after ${r.retryAfter - 1} s`)
      },
    ),
    { numRuns: 5000 },
  )
})

test('RateLimit-Reset of an allowed request (its wait) is when one more unit passes', () => {
  fc.assert(
    fc.property(limits, history, fc.integer({ min: 1, max: 4 }), ({ limit, windowS }, h, cost) => {
      const l = slidingLimit(limit, windowS)
      const { state, now } = replay(l, h)
      const r = K.step(state, l, cost, now)
      if (!r.allowed) return
      assert.equal(r.retryAfter === 0, r.value >= 1)
      if (limit >= 1) assert.equal(K.step(r.state, l, 1, now + r.retryAfter).allowed, true)
    }),
    { numRuns: 3000 },
  )
})

test('the error bound of docs/algorithms.md: in the last window_seconds at most limit + previous count × elapsed fraction pass', () => {
  fc.assert(
    fc.property(limits, history, ({ limit, windowS }, h) => {
      const l = slidingLimit(limit, windowS)
      const passed: { t: number; cost: number }[] = []
      let state: SlidingState | undefined
      let now = T0
      for (const r of h) {
        now += r.dt
        const s = K.step(state, l, r.cost, now)
        if (!s.allowed) continue
        state = s.state
        passed.push({ t: now, cost: r.cost })
        const inWindow = passed.filter((p) => p.t > now - windowS).reduce((a, p) => a + p.cost, 0)
        const f = (now - s.state.start) / windowS
        assert.ok(
          inWindow <= limit + s.state.prev * f + 1e-9,
          `${inWindow} in the last ${windowS} s, limit ${limit}, prev ${s.state.prev}, f ${f}`,
        )
        assert.ok(inWindow < 2 * limit + 1e-9)
      }
    }),
    { numRuns: 3000 },
  )
})

/** The most requests allowed in any `windowS`-long span. */
function busiestSpan(times: number[], windowS: number): number {
  let most = 0
  for (let i = 0, j = 0; i < times.length; i++) {
    while (j < times.length && times[j]! < times[i]! + windowS) j++
    most = Math.max(most, j - i)
  }
  return most
}

/** Request times of a steady stream: `rate` per second for `seconds`, each late by a `jitter` share (< 1/2) of the interval. */
const stream = (start: number, rate: number, seconds: number, jitter: number[]): number[] =>
  Array.from({ length: Math.floor(rate * seconds) }, (_, i) => start + (i + (jitter[i % jitter.length] ?? 0)) / rate)

/** The most any window-long span of a stream from a quiet key lets through. */
function busiestOfStream(limit: number, windowS: number, times: number[]): number {
  const l = slidingLimit(limit, windowS)
  let state: SlidingState | undefined
  const passed: number[] = []
  for (const t of times) {
    const s = K.step(state, l, 1, t)
    if (s.allowed) [state, passed[passed.length]] = [s.state, t]
  }
  return busiestSpan(passed, windowS)
}

test('an evenly spaced stream from a quiet key: never more than limit + 1 in any window-long span', () => {
  fc.assert(
    fc.property(
      limits,
      fc.double({ min: 1.01, max: 20, noNaN: true }),
      fc.double({ min: 0, max: 1000, noNaN: true }),
      ({ limit, windowS }, over, offset) => {
        const most = busiestOfStream(limit, windowS, stream(T0 + offset, (limit / windowS) * over, 6 * windowS, [0]))
        assert.ok(most <= limit + 1, `${most} in a ${windowS} s span`)
      },
    ),
    { numRuns: 2000 },
  )
})

test('10 per 10 s, a stream of 1 to 20 per second arriving up to half an interval late: never more than 11 in any 10 s span', () => {
  fc.assert(
    fc.property(
      fc.double({ min: 1.01, max: 20, noNaN: true }),
      fc.double({ min: 0, max: 10, noNaN: true }),
      fc.array(fc.double({ min: 0, max: 0.49, noNaN: true }), { minLength: 1, maxLength: 7 }),
      (rate, offset, jitter) => {
        const most = busiestOfStream(10, 10, stream(T0 + offset, rate, 60, jitter))
        assert.ok(most <= 11, `${most} in a 10 s span`)
      },
    ),
    { numRuns: 2000 },
  )
})

test('10 per 10 s, a stream of 4/s starting 7.5 s into a clock window: a fixed window lets 20 through in 10 s, the sliding window 11', () => {
  const times = stream(T0 + 7.5, 4, 40, [0])
  const through = (kind: 'fixed' | 'sliding'): number[] => {
    let state: unknown
    return times.filter((t) => {
      const s =
        kind === 'fixed'
          ? WINDOW_COUNTER_KIND.step(state as never, counterLimit(10, 10, 0), 1, t)
          : K.step(state as never, slidingLimit(10, 10), 1, t)
      if (s.allowed) state = s.state
      return s.allowed
    })
  }
  assert.equal(busiestSpan(through('fixed'), 10), 20)
  assert.ok(busiestSpan(through('sliding'), 10) <= 11)
})

test('max_delay_ms, the worked example of docs/algorithms.md: 5 per 1 s, 2 s of delay, requests at once: 5 now, then held 1.2 … 1.8 s, the 10th past the next window', () => {
  const l = slidingLimit(5, 1, 2)
  let state: SlidingState | undefined
  const seen: [boolean, number, number][] = []
  for (let i = 0; i < 10; i++) {
    const s = K.step(state, l, 1, T0)
    if (s.allowed) state = s.state
    seen.push([s.allowed, s.value, s.retryAfter])
  }
  assert.deepEqual(seen, [
    [true, 4, 0],
    [true, 3, 0],
    [true, 2, 0],
    [true, 1, 0],
    // Nothing left: one more unit once 5 × (1 − e/1) ≤ 4 in the next window.
    [true, 0, 2],
    // Held: estimate 5 (+ what is held) must fall to 4 as this window's 5 leave the next one.
    [true, -1, 1.2],
    [true, -2, 1.4],
    [true, -3, 1.6],
    [true, -4, 1.8],
    // It would fit at T0 + 2 s, the end of the next window: refused, until the window has turned.
    [false, -4, 1],
  ])
  assert.deepEqual(state, { prev: 0, cur: 5, start: T0, next: 4 }, 'the held four count for the next window')
  const later = K.step(state, l, 1, T0 + 1)
  assert.deepEqual([later.allowed, later.value, later.retryAfter, later.state], [true, -5, 1, { prev: 5, cur: 4, start: T0 + 1, next: 1 }])
})

test('max_delay_ms: held in this window while the previous one’s share leaves; a cost above the limit or a wait past the delay is refused', () => {
  const l = slidingLimit(10, 10, 2)
  const s: SlidingState = { prev: 10, cur: 0, start: T0, next: 0 }
  const r = K.step(s, l, 1, T0)
  // 10 × (1 − e/10) ≤ 9 from e = 1 s.
  assert.deepEqual([r.allowed, r.value, r.state], [true, -1, { prev: 10, cur: 1, start: T0, next: 0 }])
  assert.ok(Math.abs(r.retryAfter - 1) < 1e-12, `held ${r.retryAfter} s`)
  const far = K.step(s, l, 5, T0)
  // 10 × (1 − e/10) ≤ 5 from e = 5 s: 3 s more than the delay, so it passes (held 2 s) from 3 s on.
  assert.deepEqual([far.allowed, far.value, far.retryAfter], [false, 0, 3])
  assert.equal(K.step(s, l, 5, T0 + 3).allowed, true)
  assert.equal(K.step(s, l, 11, T0).allowed, false, 'a cost above the limit is never held')
  assert.equal(K.step(s, slidingLimit(10, 10), 1, T0).allowed, false, 'without a delay: rejected')
})

test('max_delay_ms: adjust gives back from the current count, then the previous, then what is counted for the next window', () => {
  const l = slidingLimit(10, 10, 5)
  const s: SlidingState = { prev: 2, cur: 3, start: T0, next: 4 }
  assert.deepEqual(K.adjust(s, l, 4, T0 + 1)!.state, { prev: 1, cur: 0, start: T0, next: 4 })
  assert.deepEqual(K.adjust(s, l, 7, T0 + 1)!.state, { prev: 0, cur: 0, start: T0, next: 2 })
  assert.deepEqual(K.adjust(s, l, 20, T0 + 1)!.state, { prev: 0, cur: 0, start: T0, next: 0 })
  assert.deepEqual(K.adjust({ prev: 0, cur: 0, start: T0, next: 2 }, l, 1, T0 + 12)!.state, { prev: 0, cur: 1, start: T0 + 10, next: 0 })
  const rolled = K.step({ prev: 0, cur: 3, start: T0, next: 4 }, l, 0, T0 + 25)
  assert.deepEqual(
    rolled.state,
    { prev: 4, cur: 0, start: T0 + 20, next: 0 },
    'two windows on, the next window’s count is the previous one',
  )
  assert.equal(K.step({ prev: 0, cur: 3, start: T0, next: 4 }, l, 0, T0 + 30).state.start, T0 + 30, 'three windows on nothing counts')
})

const delays = fc.record({
  limit: fc.integer({ min: 1, max: 12 }),
  windowS: fc.integer({ min: 1, max: 10 }),
  delayS: fc.double({ min: 0.001, max: 30, noNaN: true }),
})
/** Requests close together (bursts), costs up to 3. */
const bursts = fc.array(
  fc.record({ dt: fc.oneof(fc.constant(0), fc.double({ min: 0, max: 4, noNaN: true })), cost: fc.integer({ min: 1, max: 3 }) }),
  {
    maxLength: 40,
  },
)

test('max_delay_ms: a held request fits without a delay at the instant it is forwarded, not a millisecond before, and requests are forwarded in order', () => {
  fc.assert(
    fc.property(delays, bursts, ({ limit, windowS, delayS }, h) => {
      const l = slidingLimit(limit, windowS, delayS)
      const plain = slidingLimit(limit, windowS)
      let state: SlidingState | undefined
      let now = T0
      let last = -Infinity
      for (const r of h) {
        now += r.dt
        const s = K.step(state, l, r.cost, now)
        if (!s.allowed) continue
        const at = s.value < -1e-9 ? now + s.retryAfter : now
        assert.ok(at >= last - 1e-6, `forwarded at ${at - T0}, after one forwarded at ${last - T0}`)
        last = at
        if (s.value < -1e-9) {
          assert.ok(s.retryAfter <= delayS + 1e-9 && s.retryAfter < 2 * windowS, `held ${s.retryAfter} s`)
          // What was counted before it, at the instant it is forwarded: it passes there as a request arriving then would.
          assert.equal(K.step(state, plain, r.cost, at + 1e-6).allowed, true, 'fits when forwarded')
          if (s.retryAfter > 1e-3) assert.equal(K.step(state, plain, r.cost, at - 1e-3).allowed, false, 'not before')
        }
        state = s.state
      }
    }),
    { numRuns: 3000 },
  )
})

test('max_delay_ms: what is forwarded keeps the error bound of docs/algorithms.md, at every instant a request is forwarded', () => {
  fc.assert(
    fc.property(delays, bursts, ({ limit, windowS, delayS }, h) => {
      const l = slidingLimit(limit, windowS, delayS)
      /** Forwarded requests: when, their cost, and the start of the window they are counted in. */
      const sent: { at: number; cost: number; window: number }[] = []
      let state: SlidingState | undefined
      let now = T0
      for (const r of h) {
        now += r.dt
        const s = K.step(state, l, r.cost, now)
        if (!s.allowed) continue
        state = s.state
        const held = s.value < -1e-9
        const at = held ? now + s.retryAfter : now
        sent.push({ at, cost: r.cost, window: held && at >= s.state.start + windowS ? s.state.start + windowS : s.state.start })
      }
      const same = (a: number, b: number): boolean => Math.abs(a - b) < 1e-6
      // Instants are epoch seconds, exact to 0.24 µs: at most limit / windowS × 0.5 µs of a count.
      const tolerance = 1e-5
      for (const x of sent) {
        const before = sent.filter((y) => y.at <= x.at + 1e-9)
        const prev = before.filter((y) => same(y.window, x.window - windowS)).reduce((a, y) => a + y.cost, 0)
        const cur = before.filter((y) => same(y.window, x.window)).reduce((a, y) => a + y.cost, 0)
        const f = (x.at - x.window) / windowS
        assert.ok(prev * (1 - f) + cur <= limit + tolerance, `estimate of what was forwarded at ${x.at - T0}: ${prev} × ${1 - f} + ${cur}`)
        const inWindow = before.filter((y) => y.at > x.at - windowS).reduce((a, y) => a + y.cost, 0)
        assert.ok(
          inWindow <= limit + prev * f + tolerance,
          `${inWindow} in the last ${windowS} s, limit ${limit}, previous ${prev}, f ${f}`,
        )
        assert.ok(inWindow < 2 * limit + 1e-6)
      }
    }),
    { numRuns: 3000 },
  )
})

test('max_delay_ms: a held request given back (giveBack) comes off the window it was counted for, so the next one takes its place', () => {
  const l = slidingLimit(2, 2, 4)
  let state: SlidingState | undefined
  for (let i = 0; i < 2; i++) state = K.step(state, l, 1, T0).state
  const h = K.step(state, l, 1, T0)
  // 2 × (1 − e/2) ≤ 1 in the next window: held 3 s, counted there.
  assert.deepEqual([h.value, h.retryAfter, h.state], [-1, 3, { prev: 0, cur: 2, start: T0, next: 1 }])
  assert.equal(K.giveBack!(l, { value: 1, retryAfter: 0 }, 0), undefined, 'a charge that was not held: the plain limit')
  const back = K.giveBack!(l, h, 0.5)!
  assert.deepEqual([back.params, back.heldS], [[2, 2, -2.5], 2.5])
  assert.deepEqual(K.limit(back.params), back, 'read back from its parameters (the server scripts get those)')
  const after = K.adjust(h.state, back, 1, T0 + 0.5)!.state
  assert.deepEqual(after, { prev: 0, cur: 2, start: T0, next: 0 })
  assert.deepEqual([K.step(after, l, 1, T0 + 0.5).value, K.step(after, l, 1, T0 + 0.5).retryAfter], [-1, 2.5], 'held in its place')
  // From the current count (the plain order), the same give-back leaves the next one refused: it would fit at the end of the next window.
  assert.equal(K.step(K.adjust(h.state, l, 1, T0 + 0.5)!.state, l, 1, T0 + 0.5).allowed, false)
})
