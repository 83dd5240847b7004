/**
 * The store contract for concurrency slots (limit kind 4), on every store:
 * slots taken up to the limit and given back by an adjustment naming when
 * they were taken; a slot never given back frees itself within its lease
 * while other requests keep taking and giving back theirs; a renewal keeps a
 * slot past it. On server clocks the waits are real, and the lease-bound
 * cases leave a margin of a tenth of a second either side of the bound.
 */
import assert from 'node:assert/strict'
import { it } from 'node:test'
import { concurrencyLimit } from '../../src/algorithms/kinds/concurrency/kind.js'
import { bucketLimit } from '../../src/algorithms/kinds/token-bucket/kind.js'
import type { Check } from '../../src/store/store.js'
import type { KindContext } from './contract-kinds.js'

const slot = (key: string, max: number, leaseS: number, shadow = false): Check => ({
  key,
  limit: concurrencyLimit(max, leaseS),
  cost: 1,
  shadow,
})

export function concurrencyCases(c: KindContext): void {
  const giveBack = (key: string, max: number, leaseS: number, at: number): Promise<void> =>
    c.adjust([{ key, limit: concurrencyLimit(max, leaseS), amount: 1, at }])

  it('concurrency: takes up to max slots, then rejects with no free slot and Retry-After 1, taking nothing; a give-back frees one', async () => {
    const k = c.key('cc-limit')
    const taken: number[] = []
    const at: number[] = []
    for (let i = 0; i < 3; i++) {
      at.push(c.now())
      const [o] = await c.apply([slot(k, 3, 600)])
      assert.equal(o!.allowed, true)
      taken.push(o!.value)
    }
    assert.deepEqual(taken, [2, 1, 0], 'free slots after each take')
    const [r] = await c.apply([slot(k, 3, 600)])
    assert.deepEqual(r, { allowed: false, value: 0, retryAfter: 1 })
    await giveBack(k, 3, 600, at[1]!)
    const [again] = await c.apply([slot(k, 3, 600)])
    assert.deepEqual(again, { allowed: true, value: 0, retryAfter: 0 }, 'the rejected request took nothing; the given-back slot is free')
  })

  it('concurrency: all or nothing with the request’s other limits, and 200 parallel takes of 50 slots grant exactly 50', async () => {
    const k = c.key('cc-group')
    const empty = { key: c.key('cc-group-tb'), limit: bucketLimit(0.001, 1), cost: 1, shadow: false }
    await c.apply([empty])
    const r = await c.apply([slot(k, 1, 600), empty])
    assert.deepEqual([r[0]!.allowed, r[1]!.allowed], [true, false])
    assert.equal((await c.apply([slot(k, 1, 600)]))[0]!.allowed, true, 'the slot of the rejected request was not taken')
    const many = c.key('cc-conc')
    const results = await Promise.all(Array.from({ length: 200 }, () => c.apply([slot(many, 50, 600)])))
    assert.equal(results.filter((o) => o[0]!.allowed).length, 50)
  })

  it('concurrency: a give-back whose clock is a little off frees its slot; one older than the lease gives nothing', async () => {
    const k = c.key('cc-skew')
    await c.apply([slot(k, 1, 600)])
    await giveBack(k, 1, 600, c.now() + 150) // a clock ahead: a later bucket than the store's newest
    assert.equal((await c.apply([slot(k, 1, 600)]))[0]!.allowed, true)
    await giveBack(k, 1, 600, c.now() - 700) // its bucket would have expired: that slot is free already
    assert.equal((await c.apply([slot(k, 1, 600)]))[0]!.allowed, false, 'nothing was given back')
    await giveBack(k, 1, 600, c.now() - 150) // a clock behind: the bucket before, empty; the newer neighbour gives
    const [o] = await c.apply([slot(k, 1, 600)])
    assert.equal(o!.allowed, true)
    await giveBack(k, 1, 600, c.now())
    await giveBack(k, 1, 600, c.now())
    assert.equal((await c.apply([slot(k, 2, 600)]))[0]!.value, 1, 'never below zero taken: one give-back too many frees nothing more')
  })

  c.waits(
    'concurrency: a slot never given back is free within its lease while other requests keep taking and giving back theirs',
    async () => {
      const k = c.key('cc-dead')
      const lease = 1.5
      // The store took the holder's slot between these two instants: held at least 2/3 of the lease
      // after the first, free a lease after the second (a busy machine can make the take late).
      const start = c.now()
      assert.equal((await c.apply([slot(k, 2, lease)]))[0]!.allowed, true, 'the holder that dies')
      const took = c.now() - start
      const seen: { after: number; free: number }[] = []
      while (c.now() - start < took + lease + 0.15) {
        await c.pass(0.1)
        const at = c.now()
        const [o] = await c.apply([slot(k, 2, lease)])
        assert.equal(o!.allowed, true, 'one slot is always left for the living')
        seen.push({ after: at - start, free: o!.value })
        await giveBack(k, 2, lease, at)
      }
      const early = seen.filter((s) => s.after < (2 / 3) * lease - 0.1)
      const late = seen.filter((s) => s.after > took + lease + 0.1)
      assert.ok(early.length > 0 && late.length > 0, `took ${took}: ${JSON.stringify(seen)}`)
      assert.ok(
        early.every((s) => s.free === 0),
        `held for at least 2/3 of the lease: ${JSON.stringify(seen)}`,
      )
      assert.ok(
        late.every((s) => s.free === 1),
        `free after the lease (the take answered ${took} s after the start): ${JSON.stringify(seen)}`,
      )
    },
  )

  c.waits('concurrency: a holder that renews (give back at its time, take now) keeps its slot past the lease', async () => {
    const k = c.key('cc-renew')
    const lease = 1.5
    const limit = concurrencyLimit(1, lease)
    let at = c.now()
    await c.apply([slot(k, 1, lease)])
    const start = at
    while (c.now() - start < lease + 0.3) {
      await c.pass(0.3)
      const now = c.now()
      await c.adjust([
        { key: k, limit, amount: 1, at },
        { key: k, limit, amount: -1, at: now },
      ])
      at = now
    }
    assert.equal((await c.apply([slot(k, 1, lease)]))[0]!.allowed, false, 'still held')
    await giveBack(k, 1, lease, at)
    assert.equal((await c.apply([slot(k, 1, lease)]))[0]!.allowed, true, 'given back at its last renewal')
  })
}
