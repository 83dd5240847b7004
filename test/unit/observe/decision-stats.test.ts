/** GET /v1/admin/stats' figures (src/observe/decision-stats.ts): read from the metrics every decision counts, summed over threads. */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { addStats, noStats, readStats } from '../../../src/observe/decision-stats.js'
import { createMetrics } from '../../../src/observe/metrics.js'

test('decisions by outcome and enforced rejects by reason, as /metrics counts them (per-request tallies included)', async () => {
  const m = createMetrics()
  assert.deepEqual(await readStats(m), noStats())
  m.hot.decisions.inc('allow', 'all_rules_passed', 'api', 5)
  m.hot.decisions.inc('reject', 'token_bucket_exceeded', 'api', 3)
  m.hot.decisions.inc('reject', 'token_bucket_exceeded', 'other', 1)
  m.hot.decisions.inc('reject', 'ambiguous_request', 'api')
  m.hot.decisions.inc('error', 'store_full', 'api', 7) // a 503 is neither an allow nor a reject
  m.shadowRejects.inc({ policy: 'api' }, 2)
  assert.deepEqual(await readStats(m), {
    decisions: { allow: 5, reject: 5, shadow_reject: 2 },
    rejects_by_reason: { token_bucket_exceeded: 4, ambiguous_request: 1 },
  })
  // Reading flushed the tallies: a second read is the same, not twice as much.
  assert.equal((await readStats(m)).decisions.reject, 5)
  // The text /metrics serves agrees.
  assert.match(await m.registry.metrics(), /fairvisor_decisions_total\{action="reject",reason="token_bucket_exceeded",policy="api"\} 3/)
})

test('threads added up', () => {
  const a = { decisions: { allow: 1, reject: 2, shadow_reject: 3 }, rejects_by_reason: { x: 2 } }
  const b = { decisions: { allow: 10, reject: 20, shadow_reject: 30 }, rejects_by_reason: { x: 5, y: 15 } }
  assert.deepEqual(addStats([a, b]), { decisions: { allow: 11, reject: 22, shadow_reject: 33 }, rejects_by_reason: { x: 7, y: 15 } })
  assert.deepEqual(addStats([]), noStats())
})
