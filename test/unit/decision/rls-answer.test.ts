/**
 * The Rate Limit Service answer made from outcomes and decisions, as
 * envoyproxy/ratelimit answers: per-descriptor statuses, the overall code,
 * the RateLimit-* headers of the descriptor with the fewest requests left.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import {
  failedStatus,
  limitStatus,
  mergeDecision,
  noLimitStatus,
  OK,
  OVER_LIMIT,
  rateLimitResponse,
  storeFailed,
  storeFailureMessage,
  type DescriptorStatus,
} from '../../../src/decision/rls-answer.js'
import type { Decision } from '../../../src/engine/decision.js'

const current = { requests_per_unit: 10, unit: 1 }
const limit = { current, shadow: false }
const open: Decision = { allowed: true, status: 200, reason: 'store_unavailable_fail_open', mode: 'enforce', matchedPolicies: [] }
const closed: Decision = { allowed: false, status: 503, reason: 'service_unavailable', mode: 'enforce', matchedPolicies: [] }

test("a check's outcome: hits left, OVER_LIMIT on a reject unless shadow_mode, the limit untouched without an outcome", () => {
  assert.deepEqual(limitStatus(limit, { allowed: true, value: 4, retryAfter: 1 }), {
    code: OK,
    current_limit: current,
    limit_remaining: 6,
    duration_until_reset: { seconds: 1 },
  })
  assert.equal(limitStatus(limit, { allowed: false, value: 10, retryAfter: 1 }).code, OVER_LIMIT)
  assert.equal(limitStatus({ current, shadow: true }, { allowed: false, value: 10, retryAfter: 1 }).code, OK)
  assert.deepEqual(limitStatus(limit, undefined), { code: OK, current_limit: current, limit_remaining: 10 })
})

test('an OVER_LIMIT status (or a shadow_mode one over) has nothing left, though the count is short of the limit', () => {
  // As envoyproxy/ratelimit's base limiter: a status over its threshold reports 0 remaining (a cost of 3 at 9/10).
  assert.equal(limitStatus(limit, { allowed: false, value: 9, retryAfter: 1 }).limit_remaining, 0)
  assert.equal(limitStatus({ current, shadow: true }, { allowed: false, value: 9, retryAfter: 1 }).limit_remaining, 0)
})

test('quota_mode: OVER_LIMIT overall only when every quota descriptor is over, or a descriptor not in quota_mode is', () => {
  // As envoyproxy/ratelimit's service: failed rate limit descriptors, or all quota descriptors failed.
  const ok = limitStatus(limit, { allowed: true, value: 1, retryAfter: 1 })
  const over = limitStatus(limit, { allowed: false, value: 10, retryAfter: 1 })
  const overall = (s: DescriptorStatus[], quota: boolean[]) => rateLimitResponse(s, false, quota).overall_code
  assert.equal(overall([over], [true]), OVER_LIMIT)
  assert.equal(overall([over, ok], [true, true]), OK)
  assert.equal(overall([over, over], [true, true]), OVER_LIMIT)
  assert.equal(overall([over, ok], [true, false]), OVER_LIMIT, 'its only quota descriptor is over')
  assert.equal(overall([over, ok, ok], [true, true, false]), OK)
  assert.equal(overall([over, over], [true, false]), OVER_LIMIT)
  assert.equal(overall([over, noLimitStatus()], [true, false]), OVER_LIMIT)
  // The quota descriptor over keeps its own status.
  assert.equal(rateLimitResponse([over, ok], false, [true, true]).statuses[0]!.code, OVER_LIMIT)
})

test("a failed store: the engine's fail policy decides each checked descriptor", () => {
  assert.ok(storeFailed(open) && storeFailed(closed))
  assert.ok(!storeFailed({ ...closed, reason: 'store_full' }))
  assert.deepEqual(failedStatus(open), { code: OK, limit_remaining: 0 })
  assert.deepEqual(failedStatus(closed), { code: OVER_LIMIT, limit_remaining: 0 })
})

test("a failed store answered as an error: the message names the store's error (the reason when there is none)", () => {
  assert.equal(
    storeFailureMessage({ ...open, storeError: 'redis connection is not ready' }),
    'rate limit store unavailable: redis connection is not ready',
  )
  assert.equal(storeFailureMessage(closed), 'rate limit store unavailable: service_unavailable')
})

test("a bundle's decision on a descriptor: a reject is OVER_LIMIT; with no configured limit, its RateLimit values", () => {
  const reject: Decision = { allowed: false, status: 429, reason: 'token_bucket_exceeded', mode: 'enforce', matchedPolicies: ['p'] }
  const allow: Decision = {
    allowed: true,
    status: 200,
    reason: 'all_rules_passed',
    mode: 'enforce',
    matchedPolicies: ['p'],
    limit: { policyId: 'p', limit: 2, remaining: 1.5, resetS: 30, windowS: 60 },
  }
  assert.deepEqual(mergeDecision(noLimitStatus(), reject), { code: OVER_LIMIT, limit_remaining: 0 })
  assert.deepEqual(mergeDecision(noLimitStatus(), allow), { code: OK, limit_remaining: 1, duration_until_reset: { seconds: 30 } })
  const configured = limitStatus(limit, { allowed: true, value: 4, retryAfter: 1 })
  assert.equal(mergeDecision(configured, allow), configured, 'a configured limit keeps its own figures')
  assert.equal(mergeDecision(configured, { ...reject, reason: 'no_bundle_loaded' }), configured)
})

test('the response: OVER_LIMIT when any descriptor is; headers of the limited descriptor with the fewest left', () => {
  const a = limitStatus(limit, { allowed: true, value: 4, retryAfter: 3 })
  const b = limitStatus({ current: { requests_per_unit: 5, unit: 2 }, shadow: false }, { allowed: true, value: 4, retryAfter: 9 })
  const r = rateLimitResponse([a, b, noLimitStatus()], true)
  assert.equal(r.overall_code, OK)
  assert.deepEqual(r.response_headers_to_add, [
    { key: 'RateLimit-Limit', value: '5' },
    { key: 'RateLimit-Remaining', value: '1' },
    { key: 'RateLimit-Reset', value: '9' },
  ])
  assert.equal(rateLimitResponse([a, failedStatus(closed)], false).overall_code, OVER_LIMIT)
  assert.equal(rateLimitResponse([noLimitStatus()], true).response_headers_to_add, undefined)
  // A descriptor over its limit (not in quota_mode) is the one reported, the last such, even after one with none left.
  const none = limitStatus({ current: { requests_per_unit: 3, unit: 3 }, shadow: false }, { allowed: true, value: 3, retryAfter: 900 })
  const over = limitStatus({ current: { requests_per_unit: 10, unit: 2 }, shadow: false }, { allowed: false, value: 10, retryAfter: 30 })
  const headerValues = (res: { response_headers_to_add?: Array<{ value: string }> }) => res.response_headers_to_add?.map((h) => h.value)
  assert.deepEqual(headerValues(rateLimitResponse([none, over, a], true)), ['10', '0', '30'])
  assert.deepEqual(headerValues(rateLimitResponse([none, over], true, [false, true])), ['3', '0', '900'], 'a quota over does not take it')
  // The names envoyproxy/ratelimit's LIMIT_*_HEADER settings give.
  const named = rateLimitResponse([a, b], true, undefined, { limit: 'X-RL-Limit', remaining: 'X-RL-Left', reset: 'X-RL-Reset' })
  assert.deepEqual(named.response_headers_to_add, [
    { key: 'X-RL-Limit', value: '5' },
    { key: 'X-RL-Left', value: '1' },
    { key: 'X-RL-Reset', value: '9' },
  ])
})
