/** The admin API's view of the process (src/observe/admin-view.ts): one thread's part, and parts merged as the supervisor merges workers'. */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { mergeViews, threadView } from '../../../src/observe/admin-view.js'
import { createMetrics } from '../../../src/observe/metrics.js'
import { RejectedKeys } from '../../../src/observe/rejected-keys.js'
import { topEntries } from '../../../src/observe/space-saving.js'

const T0 = 1_700_000_000_000

async function worker(keys: string[], allowed: number) {
  const m = createMetrics()
  const top = new RejectedKeys<null>(10, 300_000, (_r, c) => c, T0)
  const group = { policy: 'api', rule: 'per_user', reason: 'token_bucket_exceeded', source: null }
  for (const k of keys) {
    top.record(group, k, T0)
    m.hot.decisions.inc('reject', 'token_bucket_exceeded', 'api')
  }
  m.hot.decisions.inc('allow', 'all_rules_passed', 'api', allowed)
  return threadView(top, m, T0 + 1)
}

test('a thread without the admin API (no rejected keys kept) still counts its decisions', async () => {
  const m = createMetrics()
  m.hot.decisions.inc('allow', 'all_rules_passed', 'api', 4)
  const v = await threadView(undefined, m, T0)
  assert.deepEqual(v.top, { entries: [], floor: 0, total: 0 })
  assert.equal(v.stats.decisions.allow, 4)
})

test('two workers: one key rejected on both is one entry with both counts; decisions added up', async () => {
  const merged = mergeViews([await worker(['alice', 'alice', 'bob'], 5), await worker(['alice', 'carol'], 1)])
  assert.deepEqual(
    topEntries(merged.top, 3).map((e) => [e.item.key, e.count]),
    [
      ['alice', 3],
      ['bob', 1],
      ['carol', 1],
    ],
  )
  assert.deepEqual(merged.stats.decisions, { allow: 6, reject: 5, shadow_reject: 0 })
  assert.deepEqual(mergeViews([]).top.entries, [])
})
