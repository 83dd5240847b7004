/**
 * docs/behaviour.md §5 token bucket as tables: (state, elapsed, cost) → (allowed, tokens, retry_after).
 * Times are epoch seconds like the engine passes (Date.now()/1000), so the
 * floating-point behaviour of real timestamps is exercised too.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import {
  bucketLimit,
  debtWaitMs,
  resetSeconds,
  secondsUntilFull,
  TOKEN_BUCKET_KIND,
  takeTokens,
  type BucketState,
} from '../../../../../src/algorithms/kinds/token-bucket/kind.js'

const T0 = 1_767_225_600 // 2026-01-01T00:00:00Z

interface Row {
  what: string
  rate: number
  burst: number
  state?: BucketState
  /** now − T0 */
  at: number
  cost: number
  allowed: boolean
  tokens: number
  retryAfter: number
  last?: number
}

const ROWS: Row[] = [
  { what: 'first request sees a full bucket', rate: 1, burst: 10, at: 0, cost: 1, allowed: true, tokens: 9, retryAfter: 0, last: T0 },
  { what: 'first request may spend the whole burst', rate: 1, burst: 10, at: 0, cost: 10, allowed: true, tokens: 0, retryAfter: 0 },
  {
    what: 'empty bucket, no time passed: reject, retry after 1/rate',
    rate: 1,
    burst: 10,
    state: { tokens: 0, last: T0 },
    at: 0,
    cost: 1,
    allowed: false,
    tokens: 0,
    retryAfter: 1,
  },
  {
    what: 'refill is elapsed × rate',
    rate: 1,
    burst: 10,
    state: { tokens: 0, last: T0 },
    at: 4,
    cost: 1,
    allowed: true,
    tokens: 3,
    retryAfter: 0,
    last: T0 + 4,
  },
  {
    what: 'refill is capped at burst',
    rate: 5,
    burst: 10,
    state: { tokens: 2, last: T0 },
    at: 3600,
    cost: 1,
    allowed: true,
    tokens: 9,
    retryAfter: 0,
  },
  {
    what: 'now < last: no refill and last does not move back',
    rate: 1,
    burst: 10,
    state: { tokens: 2, last: T0 + 5 },
    at: 0,
    cost: 1,
    allowed: true,
    tokens: 1,
    retryAfter: 0,
    last: T0 + 5,
  },
  {
    what: 'now < last on an empty bucket still rejects',
    rate: 100,
    burst: 100,
    state: { tokens: 0.5, last: T0 + 60 },
    at: 0,
    cost: 1,
    allowed: false,
    tokens: 0.5,
    retryAfter: 1,
    last: T0 + 60,
  },
  {
    what: 'cost above burst rejects even on a full bucket',
    rate: 1,
    burst: 10,
    at: 0,
    cost: 11,
    allowed: false,
    tokens: 10,
    retryAfter: 1,
  },
  {
    what: 'cost above burst rejects after any wait',
    rate: 1,
    burst: 10,
    state: { tokens: 10, last: T0 },
    at: 1e6,
    cost: 10.5,
    allowed: false,
    tokens: 10,
    retryAfter: 1,
  },
  {
    what: 'fractional tokens: 0.5 after 0.5 s at rate 1 is not enough for cost 1',
    rate: 1,
    burst: 10,
    state: { tokens: 0, last: T0 },
    at: 0.5,
    cost: 1,
    allowed: false,
    tokens: 0.5,
    retryAfter: 1,
  },
  {
    what: 'fractional cost is subtracted exactly',
    rate: 1,
    burst: 10,
    state: { tokens: 3, last: T0 },
    at: 0,
    cost: 2.5,
    allowed: true,
    tokens: 0.5,
    retryAfter: 0,
  },
  {
    what: 'fractional rate: 0.25/s, 1 s after empty, cost 1 waits ceil(0.75/0.25) = 3 s',
    rate: 0.25,
    burst: 1,
    state: { tokens: 0, last: T0 },
    at: 1,
    cost: 1,
    allowed: false,
    tokens: 0.25,
    retryAfter: 3,
  },
  {
    what: 'retry_after = ceil((cost − tokens)/rate): cost 5, 1.2 tokens, rate 2 → ceil(1.9) = 2',
    rate: 2,
    burst: 10,
    state: { tokens: 1.2, last: T0 },
    at: 0,
    cost: 5,
    allowed: false,
    tokens: 1.2,
    retryAfter: 2,
  },
  {
    what: 'retry_after is at least 1 even when the gap is tiny',
    rate: 1000,
    burst: 1000,
    state: { tokens: 0.999, last: T0 },
    at: 0,
    cost: 1,
    allowed: false,
    tokens: 0.999,
    retryAfter: 1,
  },
  {
    what: 'retry_after for a big gap at a slow rate',
    rate: 0.1,
    burst: 10,
    state: { tokens: 0, last: T0 },
    at: 0,
    cost: 10,
    allowed: false,
    tokens: 0,
    retryAfter: 100,
  },
  {
    what: 'exactly 100 ms at rate 10 refills exactly one token (no float loss)',
    rate: 10,
    burst: 1,
    state: { tokens: 0, last: T0 + 0.3 },
    at: 0.4,
    cost: 1,
    allowed: true,
    tokens: 0,
    retryAfter: 0,
  },
  {
    what: 'exactly 1/3 of the way: partial tokens stay partial',
    rate: 3,
    burst: 3,
    state: { tokens: 0, last: T0 },
    at: 0.5,
    cost: 2,
    allowed: false,
    tokens: 1.5,
    retryAfter: 1,
  },
]

for (const r of ROWS) {
  test(`token bucket: ${r.what}`, () => {
    const got = takeTokens(r.state, { rate: r.rate, burst: r.burst }, r.cost, T0 + r.at)
    assert.equal(got.allowed, r.allowed)
    assert.ok(Math.abs(got.tokens - r.tokens) < 1e-9, `tokens ${got.tokens} ≠ ${r.tokens}`)
    assert.equal(got.retryAfter, r.retryAfter)
    if (r.last !== undefined) assert.equal(got.last, r.last)
  })
}

test('token bucket: pacing exactly at the rate on a millisecond clock is never rejected', () => {
  // rate 10, burst 1: one request every 100 ms for 100 s of wall-clock milliseconds.
  let state: BucketState | undefined
  let rejects = 0
  const startMs = T0 * 1000 + 123
  for (let i = 0; i < 1000; i++) {
    const r = takeTokens(state, { rate: 10, burst: 1 }, 1, (startMs + i * 100) / 1000)
    if (!r.allowed) rejects++
    else state = { tokens: r.tokens, last: r.last }
  }
  assert.equal(rejects, 0)
})

test('token bucket: never grants more than burst + rate × elapsed', () => {
  // Requests every 7 ms for 10 s at rate 3, burst 5, cost 1: grants ≤ 5 + 3 × 10.
  let state: BucketState | undefined
  let granted = 0
  for (let ms = 0; ms <= 10_000; ms += 7) {
    const r = takeTokens(state, { rate: 3, burst: 5 }, 1, T0 + ms / 1000)
    if (r.allowed) {
      granted++
      state = { tokens: r.tokens, last: r.last }
    }
  }
  assert.ok(granted <= 35, `granted ${granted}`)
  assert.ok(granted >= 34, `granted ${granted}`)
})

test('token bucket: a rejected request leaves the tokens (as refilled) unchanged', () => {
  const r = takeTokens({ tokens: 0.4, last: T0 }, { rate: 1, burst: 2 }, 1, T0 + 0.5)
  assert.equal(r.allowed, false)
  assert.ok(Math.abs(r.tokens - 0.9) < 1e-9)
})

test('RateLimit-Reset: seconds until one token, at least 1', () => {
  assert.equal(resetSeconds(5, 1), 1)
  assert.equal(resetSeconds(1, 0.1), 1)
  assert.equal(resetSeconds(0, 1), 1)
  assert.equal(resetSeconds(0, 0.1), 10)
  assert.equal(resetSeconds(0.5, 0.1), 5)
  assert.equal(resetSeconds(0, 100), 1)
})

test('secondsUntilFull: how long until an idle bucket may be forgotten', () => {
  assert.equal(secondsUntilFull(10, { rate: 1, burst: 10 }), 0)
  assert.equal(secondsUntilFull(4, { rate: 2, burst: 10 }), 3)
  assert.equal(secondsUntilFull(0, { rate: 0.5, burst: 1 }), 2)
})

test('RateLimit-Reset and retry_after do not gain a second from float noise', () => {
  // 0.7 tokens at rate 0.1: 0.3 / 0.1 is 2.9999999999999996 or 3.0000000000000004 depending on the path; the answer is 3.
  assert.equal(resetSeconds(0.7, 0.1), 3)
  const r = takeTokens({ tokens: 0.7, last: T0 }, { rate: 0.1, burst: 1 }, 1, T0)
  assert.equal(r.retryAfter, 3)
})

test('debt: 8 requests at once on 5/s, burst 1, longest wait 2 s: all allowed, the k-th leaving −(k−1) tokens, a wait of (k−1) × 200 ms', () => {
  let state: BucketState | undefined
  const waits: number[] = []
  for (let i = 0; i < 8; i++) {
    const r = takeTokens(state, { rate: 5, burst: 1, maxDelayS: 2 }, 1, T0)
    assert.equal(r.allowed, true, `request ${i + 1}`)
    assert.ok(r.tokens === -i, `request ${i + 1} left ${r.tokens}`)
    waits.push(debtWaitMs(r.tokens, 5))
    state = { tokens: r.tokens, last: r.last }
  }
  assert.deepEqual(waits, [0, 200, 400, 600, 800, 1000, 1200, 1400])
})

test('debt: bounded by rate × longest wait; the reject says when the request could pass (held)', () => {
  let state: BucketState | undefined
  let allowed = 0
  let last: ReturnType<typeof takeTokens> | undefined
  for (let i = 0; i < 20; i++) {
    last = takeTokens(state, { rate: 5, burst: 1, maxDelayS: 2 }, 1, T0)
    if (last.allowed) {
      allowed++
      state = { tokens: last.tokens, last: last.last }
    }
  }
  assert.equal(allowed, 11, 'the full token, then 10 tokens of debt (2 s × 5/s)')
  assert.equal(last!.allowed, false)
  assert.equal(last!.tokens, -10, 'a reject leaves the debt as it was')
  assert.equal(last!.retryAfter, 1, 'one more token of debt fits after 0.2 s: at least 1 s')
  const slow = takeTokens({ tokens: -4, last: T0 }, { rate: 0.01, burst: 1, maxDelayS: 400 }, 1, T0)
  assert.deepEqual([slow.allowed, slow.retryAfter], [false, 100])
})

test('debt: the refill repays it; a wait of 0 is the plain bucket; a cost above burst is rejected whatever the debt', () => {
  const later = takeTokens({ tokens: -10, last: T0 }, { rate: 5, burst: 1, maxDelayS: 2 }, 1, T0 + 1)
  assert.deepEqual([later.allowed, later.tokens], [true, -6])
  const plain = takeTokens({ tokens: 0, last: T0 }, { rate: 5, burst: 1, maxDelayS: 0 }, 1, T0)
  assert.equal(plain.allowed, false)
  const over = takeTokens(undefined, { rate: 5, burst: 1, maxDelayS: 60 }, 2, T0)
  assert.equal(over.allowed, false)
})

test('debt: the limit carries the wait as its third parameter only when there is one, and reads it back', () => {
  assert.deepEqual(bucketLimit(5, 1).params, [5, 1])
  assert.deepEqual(bucketLimit(5, 1, 0).params, [5, 1])
  assert.deepEqual(bucketLimit(5, 1, 2).params, [5, 1, 2])
  assert.equal(TOKEN_BUCKET_KIND.limit([5, 1, 2]).maxDelayS, 2)
  assert.equal(TOKEN_BUCKET_KIND.limit([5, 1]).maxDelayS, undefined)
  const step = TOKEN_BUCKET_KIND.step({ tokens: -3, last: T0 }, bucketLimit(5, 1, 2), 1, T0)
  assert.equal(step.expireAt, T0 + 1, 'forgotten once full again: (1 − −4) / 5 s')
  assert.equal(debtWaitMs(0, 5), 0)
  assert.equal(debtWaitMs(-0.001, 5), 1, 'any debt is a wait of at least 1 ms')
  assert.equal(debtWaitMs(-3, 0.3), 10000, 'no millisecond gained from float noise')
})
