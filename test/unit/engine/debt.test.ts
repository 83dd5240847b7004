/**
 * A token bucket with max_delay_ms through the real engine and memory store:
 * an allowed request in debt carries its wait and what holding it needs
 * (engine/debt.ts) — the charges to give back and the reject it gets when it
 * cannot be held — while a bucket without a delay rejects as before.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { bundle, compile, Harness, policy, rule, tb } from '../../helpers/engine-harness.js'

const paced = (extra: object = {}) =>
  new Harness(compile(bundle([policy('api', [rule('smooth', ['header:x-user'], tb(5, 1, { max_delay_ms: 2000 }))], extra)])))

test('in debt: the k-th request at once is held (k − 1) × 200 ms; past 2 s of refill it is rejected with the wait its tokens need', () => {
  const h = paced()
  const waits = []
  for (let i = 0; i < 11; i++) {
    const d = h.run({ headers: { 'x-user': 'a' } })
    assert.equal(d.allowed, true, `request ${i + 1}`)
    assert.equal(d.limit?.remaining, 0, 'nothing remains of a bucket in debt')
    waits.push(d.delayMs ?? 0)
    assert.equal(d.debt === undefined, i === 0, 'only a request in debt carries one')
  }
  assert.deepEqual(waits, [0, 200, 400, 600, 800, 1000, 1200, 1400, 1600, 1800, 2000])
  const r = h.run({ headers: { 'x-user': 'a' } })
  assert.equal(r.allowed, false)
  assert.equal(r.reason, 'token_bucket_exceeded')
  assert.ok(r.retryAfterS! >= 1, `Retry-After ${r.retryAfterS}`)
  const later = h.run({ headers: { 'x-user': 'a' } }, 0.2)
  assert.deepEqual([later.allowed, later.delayMs], [true, 2000], 'one token repaid, one more fits')
})

test('the debt of a held request: every enforce charge of the request to give back, and the reject it gets when it cannot be held', () => {
  const b = bundle([
    policy('api', [
      rule('smooth', ['header:x-user'], tb(5, 1, { max_delay_ms: 2000 })),
      rule(
        'daily',
        ['header:x-user'],
        { budget: 100, period: '1d', staged_actions: [{ threshold_percent: 100, action: 'reject' }] },
        { algorithm: 'cost_based' },
      ),
    ]),
    policy('preview', [rule('preview', ['header:x-user'], tb(1, 10))], { mode: 'shadow' }),
  ])
  const h = new Harness(compile(b))
  h.run({ headers: { 'x-user': 'a' } })
  const d = h.run({ headers: { 'x-user': 'a' } })
  assert.equal(d.delayMs, 200)
  const debt = d.debt!
  assert.equal(debt.waitMs, 200)
  assert.equal(debt.policyId, 'api')
  assert.deepEqual(
    debt.charges.map((c) => [c.key, c.amount]),
    [
      ['tb:smooth:a', 1],
      ['cb:daily:a', 1],
    ],
    'enforce charges only: the shadow policy counts on its own',
  )
  const refused = debt.refused
  assert.deepEqual([refused.allowed, refused.status, refused.reason, refused.ruleName], [false, 429, 'token_bucket_exceeded', 'smooth'])
  assert.equal(refused.limit?.remaining, 0)
  assert.ok(refused.retryAfterS! >= 1 && refused.retryAfterS! <= 2, `the wait, jittered: ${refused.retryAfterS}`)
})

test('a debt and a budget throttle together: held for the longer of the two, the budget warning kept', () => {
  const h = new Harness(
    compile(
      bundle([
        policy('api', [
          rule('smooth', ['header:x-user'], tb(5, 1, { max_delay_ms: 2000 })),
          rule(
            'daily',
            ['header:x-user'],
            {
              budget: 2,
              period: '1d',
              staged_actions: [
                { threshold_percent: 50, action: 'throttle', delay_ms: 300 },
                { threshold_percent: 100, action: 'reject' },
              ],
            },
            { algorithm: 'cost_based' },
          ),
        ]),
      ]),
    ),
  )
  const first = h.run({ headers: { 'x-user': 'a' } })
  assert.deepEqual([first.delayMs, first.warning, first.debt], [300, 'budget_throttle', undefined])
  const second = h.run({ headers: { 'x-user': 'a' } })
  assert.deepEqual([second.delayMs, second.warning, second.debt?.waitMs], [300, 'budget_throttle', 200])
})

test('without max_delay_ms a bucket rejects as it always has, and its burst must cover its rate', () => {
  const h = new Harness(compile(bundle([policy('api', [rule('plain', ['header:x-user'], tb(5, 5))])])))
  for (let i = 0; i < 5; i++) assert.equal(h.run({ headers: { 'x-user': 'a' } }).delayMs, undefined)
  assert.equal(h.run({ headers: { 'x-user': 'a' } }).reason, 'token_bucket_exceeded')
})

test('a held request with a concurrency slot: the slot is not among the charges, and the refusal carries it to give back at once', () => {
  const b = bundle([
    policy('api', [
      rule('smooth', ['header:x-user'], tb(5, 1, { max_delay_ms: 2000 })),
      rule('in_flight', ['header:x-user'], { max_concurrent: 10 }, { algorithm: 'concurrency' }),
    ]),
  ])
  const h = new Harness(compile(b))
  h.run({ headers: { 'x-user': 'a' } })
  const d = h.run({ headers: { 'x-user': 'a' } })
  assert.equal(d.delayMs, 200)
  assert.deepEqual(
    d.debt!.charges.map((c) => c.key),
    ['tb:smooth:a'],
    'the slot goes back when the exchange ends (http/slot-holds.ts): given back here too, it would free another request',
  )
  assert.deepEqual(
    d.held?.map((s) => s.key),
    ['cc:in_flight:l300:a'],
  )
  assert.equal(d.debt!.refused.held, d.held, 'a refusal gives its slot back as any reject does')
})
