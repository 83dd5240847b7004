/**
 * sliding_window through the engine and a real in-process store, with time
 * passed in (T0 = 2026-01-01 00:00 UTC): its reason and RateLimit-* values,
 * Retry-After never before the request could pass, costs as token_bucket's,
 * and its config check.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { loadBundleBytes } from '../../../src/bundle/load.js'
import { bundle, compile, Harness, policy, T0 } from '../../helpers/engine-harness.js'

const sliding = (config: object): object => ({
  name: 'sw',
  limit_keys: ['header:x-user'],
  algorithm: 'sliding_window',
  algorithm_config: config,
})
const user = (extra: Record<string, string> = {}) => ({ headers: { 'x-user': 'u1', ...extra } })

test('3 per 10 s: three pass with RateLimit-Remaining 2, 1, 0, the fourth is rejected sliding_window_exceeded until enough has left the window', () => {
  const h = new Harness(compile(bundle([policy('p', [sliding({ limit: 3, window_seconds: 10 })])])))
  const seen = [0, 1, 2].map((s) => h.run(user(), s))
  assert.deepEqual(
    seen.map((d) => [d.allowed, d.limit?.limit, d.limit?.remaining, d.limit?.resetS, d.limit?.windowS]),
    [
      [true, 3, 2, 1, 10],
      [true, 3, 1, 1, 10],
      // Nothing left: one more unit fits once 3 × (1 − e/10) ≤ 2 in the next window, at T0 + 13.33 s.
      [true, 3, 0, 12, 10],
    ],
  )
  const r = h.run(user(), 3)
  assert.deepEqual([r.allowed, r.status, r.reason, r.limit?.remaining, r.limit?.resetS], [false, 429, 'sliding_window_exceeded', 0, 11])
  assert.ok(
    r.retryAfterS! >= 11 && r.retryAfterS! <= 17,
    `Retry-After ${r.retryAfterS}: not before the request can pass, jittered by up to half`,
  )
  assert.equal(h.run(user(), 13.3).allowed, false, 'not yet')
  assert.equal(h.run(user(), 14).allowed, true, 'the first request has left enough of the window')
})

test('costs as token_bucket: cost_source header, default_cost when absent, raised to min_cost; a cost above the limit always rejects', () => {
  const h = new Harness(
    compile(
      bundle([policy('p', [sliding({ limit: 10, window_seconds: 60, cost_source: 'header:x-cost', default_cost: 4, min_cost: 2 })])]),
    ),
  )
  assert.equal(h.run(user({ 'x-cost': '3' })).limit?.remaining, 7)
  assert.equal(h.run(user()).limit?.remaining, 3, 'default_cost 4')
  assert.equal(h.run(user({ 'x-cost': '1' })).limit?.remaining, 1, 'raised to min_cost 2')
  const big = h.run({ headers: { 'x-user': 'u2', 'x-cost': '11' } })
  assert.deepEqual([big.allowed, big.reason], [false, 'sliding_window_exceeded'])
})

test('fairvisor validate: a fixed_cost above limit loads with a warning naming its JSON pointer', () => {
  const doc = bundle([policy('p', [sliding({ limit: 2, window_seconds: 60, fixed_cost: 3 })])])
  const r = loadBundleBytes(Buffer.from(JSON.stringify(doc)), 'mem.json', T0)
  assert.ok(r.ok)
  assert.deepEqual(r.warnings, [
    'mem.json: /policies/0/spec/rules/0/algorithm_config/fixed_cost: policy "p", rule "sw": fixed_cost (3) is above limit (2), so every request this rule selects is rejected.',
  ])
})

test('max_delay_ms: 5 per 1 s, 2 s of delay, 10 at once: 5 pass, 4 are held 1.2 … 1.8 s as debts (RateLimit-Remaining 0), the 10th is refused', () => {
  const h = new Harness(compile(bundle([policy('p', [sliding({ limit: 5, window_seconds: 1, max_delay_ms: 2000 })])])))
  const seen = Array.from({ length: 10 }, () => h.run(user()))
  assert.deepEqual(
    seen.map((d) => [d.allowed, d.delayMs, d.debt !== undefined, d.limit?.remaining]),
    [
      [true, undefined, false, 4],
      [true, undefined, false, 3],
      [true, undefined, false, 2],
      [true, undefined, false, 1],
      [true, undefined, false, 0],
      [true, 1200, true, 0],
      [true, 1400, true, 0],
      [true, 1600, true, 0],
      [true, 1800, true, 0],
      [false, undefined, false, 0],
    ],
  )
  // A held request's reset is when it is forwarded; its refusal (no hold free) is the window's reject with that wait.
  assert.equal(seen[8]!.limit?.resetS, 2)
  assert.deepEqual([seen[8]!.debt!.refused.reason, seen[8]!.debt!.refused.retryAfterS! >= 2], ['sliding_window_exceeded', true])
  // Its charge, given back, comes off the window it was counted for: its limit says how much of the wait is left.
  const debt = seen[8]!.debt!
  assert.deepEqual(
    debt.charges.map((c) => [c.amount, c.limit.params]),
    [[1, [5, 1, -1.8]]],
  )
  assert.deepEqual(
    debt.chargesAfter!(800).map((c) => c.limit.params),
    [[5, 1, -1]],
  )
  const r = seen[9]!
  assert.deepEqual([r.reason, r.limit?.resetS], ['sliding_window_exceeded', 1], 'held from when the window has turned')
  assert.ok(r.retryAfterS! >= 1 && r.retryAfterS! <= 2, `Retry-After ${r.retryAfterS}`)
  // At 1 s the window has turned (5 previous, the 4 held now current): 5 × (1 − e) + 4 ≤ 4 at e = 1 s, then 4 × (1 − e) + 1 ≤ 4 … at 1.25 s.
  assert.deepEqual([h.run(user(), 1).delayMs, h.run(user(), 1).delayMs], [1000, 1250])
})

test('fairvisor validate: max_delay_ms past 30 s is refused, past two windows loads with a warning, both naming the JSON pointer', () => {
  const load = (config: object) =>
    loadBundleBytes(
      Buffer.from(JSON.stringify(bundle([policy('p', [sliding({ limit: 5, window_seconds: 1, ...config })])]))),
      'mem.json',
      T0,
    )
  const long = load({ max_delay_ms: 2500 })
  assert.ok(long.ok)
  assert.deepEqual(long.warnings, [
    'mem.json: /policies/0/spec/rules/0/algorithm_config/max_delay_ms: policy "p", rule "sw": max_delay_ms (2500) is above two windows (2000 ms): a request is never held past the end of the window after the current one, so no wait is that long.',
  ])
  const over = load({ max_delay_ms: 30001 })
  assert.ok(over.ok)
  assert.deepEqual(over.dropped.length, 1)
  for (const ms of [0, 2000]) {
    const quiet = load({ max_delay_ms: ms })
    assert.ok(quiet.ok)
    assert.deepEqual([quiet.dropped, quiet.warnings], [[], []], `max_delay_ms ${ms}`)
  }
})
