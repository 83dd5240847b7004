/**
 * A kind added to the kind table reaches an existing PostgreSQL deployment:
 * the next store to open on the table prefix re-creates the functions
 * (CREATE OR REPLACE, same signatures) with the new kind's branch, and a
 * store already running on that prefix goes on with every kind, old and new,
 * as a gateway of the former version does during a rolling upgrade.
 */
import assert from 'node:assert/strict'
import { it } from 'node:test'
import { registerKind } from '../../src/algorithms/kinds/index.js'
import type { Check } from '../../src/store/store.js'
import { SLIDING_WINDOW_KIND, slidingLimit } from '../fixtures/kinds/sliding-window/kind.js'
import { applyAsync, tbCheck } from '../helpers/store.js'
import { dropPrefix, openStore, uniquePrefix } from '../helpers/postgres-db.js'

it('a store opened with a new kind upgrades the functions in place; a store opened before keeps serving every kind', async () => {
  const prefix = uniquePrefix('kinds')
  const sliding = (key: string): Check => ({ key, limit: slidingLimit(5, 3600), cost: 1, shadow: false })
  const before = await openStore(prefix)
  try {
    await assert.rejects(applyAsync(before, [sliding('sw:a')], 0), /unknown limit kind 100/, 'the functions know the built-in kinds only')
    assert.equal((await applyAsync(before, [tbCheck('tb:a', 5, 1e-9)], 0))[0]!.value, 4)
    registerKind(SLIDING_WINDOW_KIND)
    const after = await openStore(prefix)
    try {
      assert.deepEqual((await applyAsync(after, [sliding('sw:a')], 0))[0], { allowed: true, value: 1, retryAfter: 0 })
      assert.deepEqual((await applyAsync(before, [sliding('sw:a')], 0))[0], { allowed: true, value: 2, retryAfter: 0 })
      assert.equal((await applyAsync(before, [tbCheck('tb:a', 5, 1e-9)], 0))[0]!.value, 3, 'the built-in kinds keep their state')
    } finally {
      await after.close()
    }
  } finally {
    await before.close()
    await dropPrefix(prefix)
  }
})
