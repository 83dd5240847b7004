/** A rule's count_statuses / refund_statuses compiled: exact codes and classes, matched for every status. */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { statusRuleOf } from '../../../src/bundle/status-patterns.js'
import type { RawRule } from '../../../src/bundle/types.js'

const raw = (extra: Partial<RawRule>): RawRule => ({ algorithm: 'token_bucket', algorithm_config: {}, ...extra })

test('no status option: nothing to settle', () => {
  assert.equal(statusRuleOf(raw({})), undefined)
})

test('exact codes match themselves only; a class matches its hundred', () => {
  const r = statusRuleOf(raw({ count_statuses: ['401', '403', '5xx'] }))!
  assert.equal(r.kind, 'count')
  const matching = []
  for (let s = 100; s < 600; s++) if (r.matches(s)) matching.push(s)
  assert.deepEqual(matching, [401, 403, ...Array.from({ length: 100 }, (_, i) => 500 + i)])
  assert.equal(r.matches(99), false)
  assert.equal(r.matches(600), false)
})

test('refund_statuses, with a class written in capitals', () => {
  const r = statusRuleOf(raw({ refund_statuses: ['4XX'] }))!
  assert.equal(r.kind, 'refund')
  assert.deepEqual([r.matches(400), r.matches(499), r.matches(500), r.matches(399)], [true, true, false, false])
})
