/**
 * cost_based, loop_detection and circuit_breaker through the engine and a
 * real in-process store, with time passed in (T0 = Thursday 2026-01-01 00:00 UTC).
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { bundle, compile, Harness, policy, rule, tb } from '../../helpers/engine-harness.js'

const budgetRule = (budget: number, period: string, stages: object[], extra: object = {}): object => ({
  name: 'spend',
  limit_keys: ['header:x-tenant'],
  algorithm: 'cost_based',
  algorithm_config: { budget, period, staged_actions: [...stages, { threshold_percent: 100, action: 'reject' }], ...extra },
})
const tenant = { headers: { 'x-tenant': 't1' } }

for (const [period, seconds, untilNext] of [
  ['5m', 300, 300],
  ['1h', 3600, 3600],
  ['1d', 86_400, 86_400],
  ['7d', 604_800, 3 * 86_400],
] as const) {
  test(`cost_based ${period}: the budget resets at the UTC period boundary (${untilNext} s after T0)`, () => {
    const h = new Harness(compile(bundle([policy('p', [budgetRule(2, period, [])])])))
    assert.equal(h.run(tenant, 0).allowed, true)
    assert.equal(h.run(tenant, 1).allowed, true)
    const r = h.run(tenant, 2)
    assert.equal(r.reason, 'budget_exceeded')
    assert.equal(r.limit?.resetS, untilNext - 2)
    assert.ok(
      r.retryAfterS! >= untilNext - 2 && r.retryAfterS! <= untilNext - 2 + 60,
      `Retry-After ${r.retryAfterS}: the ${untilNext - 2} s left, jittered later by at most a minute`,
    )
    assert.equal(r.limit?.limit, 2)
    assert.equal(r.limit?.windowS, seconds)
    assert.equal(h.run(tenant, untilNext - 1).allowed, false, 'still the same period one second before its end')
    assert.equal(h.run(tenant, untilNext).allowed, true, 'a new period')
  })
}

test('cost_based 1M: a calendar month of UTC, 31 days from T0 then 28 (February 2026); RateLimit-Reset and Retry-After agree with the 1st', () => {
  const h = new Harness(compile(bundle([policy('p', [budgetRule(2, '1M', [])])])))
  const jan = 31 * 86_400
  const first = h.run(tenant, 3600)
  assert.deepEqual([first.allowed, first.limit?.remaining, first.limit?.resetS, first.limit?.windowS], [true, 1, jan - 3600, 2_592_000])
  assert.equal(h.run(tenant, 7200).allowed, true)
  const r = h.run(tenant, jan - 10)
  assert.deepEqual([r.allowed, r.reason, r.limit?.resetS], [false, 'budget_exceeded', 10])
  assert.ok(r.retryAfterS! >= 10 && r.retryAfterS! <= 15, `Retry-After ${r.retryAfterS}: never before the 1st`)
  const feb = h.run(tenant, jan)
  assert.deepEqual([feb.allowed, feb.limit?.remaining, feb.limit?.resetS], [true, 1, 28 * 86_400], 'February 1st 00:00 UTC: a new month')
})

test('cost_based 1M, the worked example of docs/algorithms.md: spent by 27 February 12:00 UTC, whole again on 1 March', () => {
  const h = new Harness(compile(bundle([policy('p', [budgetRule(1000, '1M', [], { cost_key: 'header:x-cost' })])])))
  const day = 86_400
  assert.equal(h.run({ headers: { 'x-tenant': 't1', 'x-cost': '1000' } }, 31 * day + 3600).allowed, true)
  const rejected = h.run(tenant, 57.5 * day)
  assert.deepEqual([rejected.reason, rejected.limit?.resetS], ['budget_exceeded', 129_600])
  assert.ok(rejected.retryAfterS! >= 129_600 && rejected.retryAfterS! <= 129_660)
  const march = h.run(tenant, 59 * day)
  assert.deepEqual([march.allowed, march.limit?.resetS], [true, 2_678_400])
})

test('Retry-After of every reject is never earlier than RateLimit-Reset, the moment the request could pass, whoever the client', () => {
  const rules = [
    budgetRule(1, '1d', []),
    budgetRule(1, '1M', []),
    { name: 'tb', limit_keys: ['header:x-tenant'], algorithm: 'token_bucket', algorithm_config: { tokens_per_second: 0.001, burst: 1 } },
    { name: 'sw', limit_keys: ['header:x-tenant'], algorithm: 'sliding_window', algorithm_config: { limit: 1, window_seconds: 7200 } },
  ]
  for (const r of rules) {
    const h = new Harness(compile(bundle([policy('p', [r])])))
    for (let n = 0; n < 100; n++) {
      // Each client its own address and key: its own jitter.
      const who = { headers: { 'x-tenant': `t${n}` }, peer: `10.0.${n >> 8}.${n & 255}` }
      assert.equal(h.run(who, 5).allowed, true)
      const d = h.run(who, 6)
      assert.equal(d.allowed, false)
      assert.ok(d.retryAfterS! >= d.limit!.resetS, `${d.reason}: Retry-After ${d.retryAfterS} before RateLimit-Reset ${d.limit!.resetS}`)
    }
  }
})

test('cost_based stages: warn from 50 %, throttle from 80 % (delay), reject above 100 %; file order does not matter', () => {
  const h = new Harness(
    compile(
      bundle([
        policy('p', [
          budgetRule(10, '1h', [
            { threshold_percent: 80, action: 'throttle', delay_ms: 40 },
            { threshold_percent: 50, action: 'warn' },
          ]),
        ]),
      ]),
    ),
  )
  const seen = Array.from({ length: 11 }, (_, i) => {
    const d = h.run(tenant, i)
    return d.allowed ? `${d.warning ?? 'none'}${d.delayMs ? `/${d.delayMs}` : ''}/${d.limit?.remaining}` : d.reason
  })
  assert.deepEqual(seen, [
    'none/9',
    'none/8',
    'none/7',
    'none/6',
    'budget_warn/5',
    'budget_warn/4',
    'budget_warn/3',
    'budget_throttle/40/2',
    'budget_throttle/40/1',
    'budget_throttle/40/0',
    'budget_exceeded',
  ])
})

test('cost_based: a rejected request leaves no increment; costs come from the header, raised to min_cost', () => {
  const h = new Harness(compile(bundle([policy('p', [budgetRule(10, '1h', [], { cost_key: 'header:x-cost', min_cost: 0.5 })])])))
  assert.equal(h.run({ headers: { 'x-tenant': 't', 'x-cost': '8' } }).allowed, true)
  assert.equal(h.run({ headers: { 'x-tenant': 't', 'x-cost': '5' } }).reason, 'budget_exceeded')
  assert.equal(h.run({ headers: { 'x-tenant': 't', 'x-cost': '2' } }).limit?.remaining, 0, 'usage 8 + 2: the 5 was rolled back')
  const tiny = new Harness(compile(bundle([policy('p', [budgetRule(1, '1h', [], { cost_key: 'header:x-cost', min_cost: 0.5 })])])))
  const passed = Array.from({ length: 10 }, () => tiny.run({ headers: { 'x-tenant': 't', 'x-cost': '0.0001' } }).allowed).filter(
    Boolean,
  ).length
  assert.equal(passed, 2, 'a cost of 0.0001 is charged as min_cost 0.5')
})

const loopPolicy = (action: string, threshold = 3, windowS = 10): object =>
  policy('p', [rule('per_ip', ['ip:address'], tb(1000, 1000))], {
    loop_detection: { enabled: true, window_seconds: windowS, threshold_identical_requests: threshold, action, similarity: 'exact' },
  })

test('loop_detection reject: the threshold-th identical request is rejected until the window passes; another query is not', () => {
  const h = new Harness(compile(bundle([loopPolicy('reject')])))
  const same = { path: '/agent/step', query: 'b=2&a=1' }
  assert.equal(h.run(same, 0).allowed, true)
  assert.equal(h.run({ path: '/agent/step', query: 'a=1&b=2' }, 1).allowed, true, 'query order does not change the fingerprint')
  const r = h.run(same, 2)
  assert.equal(r.reason, 'loop_detected')
  assert.ok(r.retryAfterS! >= 8 && r.retryAfterS! <= 12, `retry after the rest of the window (8 s, jittered up): ${r.retryAfterS}`)
  assert.equal(h.run({ path: '/agent/step', query: 'a=2' }, 3).allowed, true, 'a different query is another fingerprint')
  assert.equal(h.run({ ...same, peer: '10.0.0.9' }, 3).allowed, true, 'another client (descriptor value) is another fingerprint')
  assert.equal(h.run(same, 9.9).allowed, false)
  assert.equal(h.run(same, 10).allowed, true, 'the window started at the first request has passed')
})

test('loop_detection warn and throttle: allowed with a warning; throttle delays count × 100 ms', () => {
  const warn = new Harness(compile(bundle([loopPolicy('warn')])))
  const w = [0, 1, 2, 3].map((t) => warn.run({}, t))
  assert.deepEqual(
    w.map((d) => [d.allowed, d.warning]),
    [
      [true, undefined],
      [true, undefined],
      [true, 'loop_detected'],
      [true, 'loop_detected'],
    ],
  )
  const throttle = new Harness(compile(bundle([loopPolicy('throttle', 2)])))
  assert.deepEqual(
    [0, 1, 2].map((t) => throttle.run({}, t).delayMs),
    [undefined, 200, 300],
  )
})

const breakerPolicy = (threshold: number, resetMinutes: number, version = 1): object =>
  bundle(
    [
      policy('p', [rule('per_ip', ['ip:address'], tb(1000, 1000))], {
        circuit_breaker: {
          enabled: true,
          spend_rate_threshold_per_minute: threshold,
          action: 'reject',
          auto_reset_after_minutes: resetMinutes,
        },
      }),
    ],
    { bundle_version: version },
  )

test('circuit_breaker: opens at the threshold, rejects while open, closes after auto_reset_after_minutes', () => {
  const h = new Harness(compile(breakerPolicy(5, 1)))
  assert.deepEqual(
    [0, 1, 2, 3].map((t) => h.run({}, t).allowed),
    [true, true, true, true],
  )
  const open = h.run({}, 4)
  assert.equal(open.reason, 'circuit_breaker_open')
  assert.ok(open.retryAfterS! >= 60 && open.retryAfterS! <= 90, `Retry-After ${open.retryAfterS}`)
  assert.equal(h.run({}, 63).reason, 'circuit_breaker_open')
  assert.equal(h.run({}, 64).allowed, true, 'closed one minute after it opened')
})

test('circuit_breaker: the previous minute counts, weighted by what is left of it in the sliding minute', () => {
  const h = new Harness(compile(breakerPolicy(5, 1)))
  for (let t = 0; t < 4; t++) assert.equal(h.run({}, t).allowed, true) // 4 in minute 0
  // At 90 s minute 1 is half over, so minute 0 weighs 4 × 0.5 = 2: rates 3, 4, then 5 opens.
  assert.deepEqual(
    [90, 90, 90].map((t) => h.run({}, t).allowed),
    [true, true, false],
  )
  const later = new Harness(compile(breakerPolicy(5, 1)))
  for (let t = 0; t < 4; t++) later.run({}, t)
  // At 119 s minute 0 weighs 4 × 1/60: four more fit in minute 1.
  assert.deepEqual(
    [119, 119, 119, 119, 119].map((t) => later.run({}, t).allowed),
    [true, true, true, true, false],
  )
})

test('circuit_breaker with auto_reset_after_minutes 0 stays open until the bundle is reloaded', () => {
  const first = compile(breakerPolicy(2, 0, 1))
  const h = new Harness(first)
  h.run({}, 0)
  assert.equal(h.run({}, 1).reason, 'circuit_breaker_open')
  assert.equal(h.run({}, 86_400 * 30).reason, 'circuit_breaker_open', 'a month later')
  // A new bundle version keys the breaker anew (the harness's store is new too; the key is checked below).
  const reloaded = new Harness(compile(breakerPolicy(2, 0, 2)))
  assert.notEqual(first.policies[0]!.breaker!.counterPrefix, reloaded.bundle.policies[0]!.breaker!.counterPrefix)
  assert.equal(reloaded.run({}, 86_400 * 30).allowed, true)
})

/** A breaker on spend whose cost the client sends in `x-request-cost`, per-tenant buckets of burst 100. */
const spendBreaker = (threshold: number): object =>
  bundle([
    policy('p', [rule('per_tenant', ['header:x-tenant'], { tokens_per_second: 10, burst: 100, cost_source: 'header:x-request-cost' })], {
      circuit_breaker: { enabled: true, spend_rate_threshold_per_minute: threshold, action: 'reject', auto_reset_after_minutes: 0 },
    }),
  ])

test('circuit_breaker: a request its own rule rejects (cost 999999 above burst) neither opens the breaker nor spends on it', () => {
  const h = new Harness(compile(spendBreaker(1000)))
  const attack = h.run({ headers: { 'x-tenant': 'evil', 'x-request-cost': '999999' } }, 0)
  assert.equal(attack.reason, 'token_bucket_exceeded', 'the attacker gets its own rule reason')
  for (let i = 0; i < 9; i++)
    assert.equal(
      h.run({ headers: { 'x-tenant': `t${i}`, 'x-request-cost': '100' } }, 1).allowed,
      true,
      `tenant t${i} (spend ${(i + 1) * 100} of 1000)`,
    )
  assert.equal(
    h.run({ headers: { 'x-tenant': 't9', 'x-request-cost': '100' } }, 1).reason,
    'circuit_breaker_open',
    'the 10th 100 reaches the threshold: admitted spend still counts',
  )
})

test('circuit_breaker: a drained bucket rejecting a request keeps its cost off the breaker', () => {
  const h = new Harness(compile(spendBreaker(150)))
  assert.equal(h.run({ headers: { 'x-tenant': 'a', 'x-request-cost': '100' } }, 0).allowed, true)
  for (let i = 0; i < 5; i++)
    assert.equal(
      h.run({ headers: { 'x-tenant': 'a', 'x-request-cost': '100' } }, 0).reason,
      'token_bucket_exceeded',
      `request ${i + 2} of tenant a: its bucket is empty`,
    )
  // Spend admitted: 100 of 150. Had a rejected 100 counted, the breaker would be open (200).
  assert.equal(h.run({ headers: { 'x-tenant': 'b', 'x-request-cost': '10' } }, 0).allowed, true)
})

test("circuit_breaker: where the first rule does not apply, a client-chosen cost counts at most the rule's burst", () => {
  const h = new Harness(compile(spendBreaker(150)))
  // No x-tenant: the rule is skipped (missing key), the breaker still counts its cost, capped at burst 100.
  assert.equal(h.run({ headers: { 'x-request-cost': '999999' } }, 0).allowed, true)
  assert.equal(h.run({ headers: { 'x-tenant': 'b', 'x-request-cost': '10' } }, 0).allowed, true, '100 + 10 < 150: still closed')
})

test('loop_detection counts only what the rules admitted: requests a bucket rejects do not advance the loop counter', () => {
  // The client's count is still 1: a second admitted identical request is not a loop.
  const refill = new Harness(
    compile(
      bundle([
        policy('p', [rule('per_ip', ['ip:address'], tb(1, 1))], {
          loop_detection: { enabled: true, window_seconds: 60, threshold_identical_requests: 3, action: 'reject', similarity: 'exact' },
        }),
      ]),
    ),
  )
  assert.equal(refill.run({}, 0).allowed, true)
  for (let i = 0; i < 5; i++) assert.equal(refill.run({}, 0.1).reason, 'token_bucket_exceeded')
  assert.equal(
    refill.run({}, 1.2).allowed,
    true,
    'the second admitted identical request, after five rejected ones, is not the third of a loop',
  )
})
