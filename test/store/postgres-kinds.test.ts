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
import { GCRA_KIND, gcraLimit } from '../fixtures/kinds/gcra/kind.js'
import { applyAsync, tbCheck } from '../helpers/store.js'
import { dropPrefix, openStore, uniquePrefix } from '../helpers/postgres-db.js'

it('a store opened with a new kind upgrades the functions in place; a store opened before keeps serving every kind', async () => {
  const prefix = uniquePrefix('kinds')
  const gcra = (key: string): Check => ({ key, limit: gcraLimit(5, 3600), cost: 1, shadow: false })
  const before = await openStore(prefix)
  try {
    await assert.rejects(applyAsync(before, [gcra('gc:a')], 0), /unknown limit kind 100/, 'the functions know the built-in kinds only')
    assert.equal((await applyAsync(before, [tbCheck('tb:a', 5, 1e-9)], 0))[0]!.value, 4)
    registerKind(GCRA_KIND)
    const after = await openStore(prefix)
    try {
      // Requests left of 5 per hour: 4, then 3 (a few ms of schedule caught up: within a thousandth).
      const first = (await applyAsync(after, [gcra('gc:a')], 0))[0]!
      const second = (await applyAsync(before, [gcra('gc:a')], 0))[0]!
      assert.deepEqual([first.allowed, second.allowed], [true, true])
      assert.ok(Math.abs(first.value - 4) < 1e-3 && Math.abs(second.value - 3) < 1e-3, `${first.value}, ${second.value}`)
      assert.equal((await applyAsync(before, [tbCheck('tb:a', 5, 1e-9)], 0))[0]!.value, 3, 'the built-in kinds keep their state')
    } finally {
      await after.close()
    }
  } finally {
    await before.close()
    await dropPrefix(prefix)
  }
})
