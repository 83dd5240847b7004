// A rejected call's counters read back: from the store's read-backs, or by further calls when it made none.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { counterLimit } from '../../../src/algorithms/kinds/window-counter/kind.js'
import { readBacks, readRejected, type ChargeRejected } from '../../../src/engine/read-back.js'
import { MemoryStore } from '../../../src/store/memory/store.js'
import type { Check, Outcomes, Store } from '../../../src/store/store.js'

const NOW_MS = 1_000_000_000
const check = (key: string, cost = 1): Check => ({ key, limit: counterLimit(2, 3600, -1), cost, shadow: false })

/** Three counters of limit 2, the second at it; the call's outcomes as the store answered them. */
function setUp(): { store: Store; checks: Check[]; outcomes: Outcomes } {
  const store = new MemoryStore({ maxBytes: 1 << 20 })
  store.applyNow([check('b', 2)], NOW_MS / 1000)
  const checks = [check('a'), check('b'), check('c')]
  return { store, checks, outcomes: store.applyNow(checks, NOW_MS / 1000) }
}

const values = (o: Outcomes): Array<number | undefined> => [...o].map((r) => r?.value)

describe('readBacks', () => {
  it("takes the store's read-backs of the rejected group; false when it made none; undefined when nothing rejected", () => {
    const { checks, outcomes } = setUp()
    assert.equal(readBacks(checks, [...outcomes], new Array(3)), false)
    const reads: Outcomes = [
      { allowed: true, value: 1, retryAfter: 1 },
      { allowed: false, value: 3, retryAfter: 1 },
      { allowed: true, value: 1, retryAfter: 1 },
    ]
    const merged = [...outcomes]
    assert.deepEqual(readBacks(checks, merged, reads), [true, true, true])
    assert.deepEqual(values(merged), [1, 3, 1])
    assert.equal(readBacks([check('x')], [{ allowed: true, value: 1, retryAfter: 0 }], new Array(1)), undefined)
  })
})

describe('readRejected (a store without read-backs)', () => {
  const run = (charge: ChargeRejected): Promise<{ outcomes: Outcomes; read: boolean[] | undefined }> => {
    const { store, checks, outcomes } = setUp()
    return new Promise((resolve) => readRejected(store, checks, outcomes, NOW_MS, charge, (read) => resolve({ outcomes, read })))
  }

  it('charges every check, then reads each, past its limit or not', async () => {
    const { outcomes, read } = await run(true)
    assert.deepEqual(read, [true, true, true])
    assert.deepEqual(values(outcomes), [1, 3, 1])
  })

  it('charges only those the function picks from their first read', async () => {
    const { outcomes, read } = await run((_i, o) => o.value + 1 > 2)
    assert.deepEqual(read, [true, true, true])
    assert.deepEqual(values(outcomes), [0, 3, 0])
  })

  it('reads without charging', async () => {
    const { outcomes } = await run(false)
    assert.deepEqual(values(outcomes), [0, 2, 0])
  })
})
