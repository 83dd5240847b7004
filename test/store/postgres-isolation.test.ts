// One request whose data makes PostgreSQL fail the batched statement (here a float8 overflow:
// SQLSTATE 22003) gets the store error alone; the other requests of its batch get their outcomes.
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { counterLimit } from '../../src/algorithms/kinds/window-counter/kind.js'
import { StoreError } from '../../src/errors.js'
import type { PostgresStore } from '../../src/store/postgres/store.js'
import { applyAsync, type Check, type Outcomes } from '../../src/store/store.js'
import { tbCheck } from '../helpers/store.js'
import { dropPrefix, openStore, uniquePrefix } from '../helpers/postgres-db.js'

const prefix = uniquePrefix('iso')
/** A window counter at 1e308 of 1.7e308: one more 1e308 overflows float8 inside the statement. */
const huge = (key: string): Check => ({ key: `wc:${key}`, limit: counterLimit(1.7e308, 60, -1), cost: 1e308, shadow: false })

describe('postgres store: a request failing on its own data', () => {
  let store: PostgresStore
  before(async () => {
    store = await openStore(prefix)
    await applyAsync(store, [huge('poison')], 0)
  })
  after(async () => {
    await store.close()
    await dropPrefix(prefix)
  })

  const settle = (checks: Check[]): Promise<Outcomes | Error> => applyAsync(store, checks, 0).catch((e: Error) => e)

  for (const offenders of [1, 3]) {
    it(`fails only itself in a batch of 100 (${offenders} offender${offenders > 1 ? 's' : ''}); its neighbours are limited exactly`, async () => {
      const victim = `tb:victim-${offenders}`
      const before = store.statements
      // One event-loop turn: a single batch, offenders spread through it.
      const out = await Promise.all(
        Array.from({ length: 100 }, (_, i) => settle(i % 40 === 7 && i / 40 < offenders ? [huge('poison')] : [tbCheck(victim, 40, 0.001)])),
      )
      const errors = out.filter((o) => o instanceof Error)
      assert.equal(errors.length, offenders, `${errors.length} store errors, first: ${(errors[0] as Error | undefined)?.message}`)
      assert.ok(
        errors.every((e) => e instanceof StoreError && /22003/.test(e.message)),
        'the offender gets the overflow error',
      )
      const allowed = out.filter((o) => !(o instanceof Error) && o[0]!.allowed).length
      assert.equal(allowed, 40, 'the victims share their burst of 40, no more, no less')
      assert.ok(store.statements - before <= 1 + 2 * offenders * 8, `statements: ${store.statements - before} (split, not one per request)`)
    })
  }
})
