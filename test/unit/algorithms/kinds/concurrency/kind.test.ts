/**
 * The concurrency kind's maths (kinds/concurrency/kind.ts) on real epoch
 * times: slots per lease bucket (a third of the lease), buckets expiring
 * three buckets later whatever else happens, give-backs by the time their
 * slot was taken (its bucket, else the newer then the older neighbour), and
 * renewals. The in-place forms the in-process stores run on their cells
 * (stepCells, adjustCells) decide and write what step / adjust do. The Lua
 * and PL/pgSQL twins are held to the same by the store contract, the
 * differential test and the twins property test.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import fc from 'fast-check'
import type { Step } from '../../../../../src/algorithms/algorithm.js'
import { bucketOf, CONCURRENCY_KIND, concurrencyLimit, type SlotsState } from '../../../../../src/algorithms/kinds/concurrency/kind.js'

const K = CONCURRENCY_KIND
const L = concurrencyLimit(3, 30) // buckets of 10 s
const T0 = 1_767_225_600 // 2026-01-01T00:00:00Z, a bucket boundary
const B0 = bucketOf(T0, 30)

/** Takes one slot at each of `times` (seconds after T0), returning the last step. */
function takeAt(state: SlotsState | undefined, ...times: number[]): Step<SlotsState> {
  let r: Step<SlotsState> | undefined
  for (const t of times) {
    r = K.step(state, L, 1, T0 + t)
    if (r.allowed) state = r.state
  }
  return r!
}

describe('concurrency kind', () => {
  it('takes slots up to max, then rejects with the free slots and Retry-After 1, the state unchanged', () => {
    const a = takeAt(undefined, 0)
    assert.deepEqual([a.allowed, a.value, a.retryAfter], [true, 2, 0])
    assert.deepEqual(a.state, { bucket: B0, c0: 1, c1: 0, c2: 0 })
    const full = takeAt(a.state, 1, 2)
    assert.equal(full.value, 0)
    const r = K.step(full.state, L, 1, T0 + 3)
    assert.deepEqual([r.allowed, r.value, r.retryAfter], [false, 0, 1])
    assert.deepEqual(r.state, full.state)
    assert.equal(K.step(undefined, L, 4, T0).allowed, false, 'a cost above max never fits')
  })

  it('counts each bucket on its own: a slot expires three buckets after its own, however many come after it', () => {
    // A dead holder at t=1 (bucket B0); then a slot taken and given back every 2 s.
    let s = takeAt(undefined, 1).state
    for (let t = 3; t < 40; t += 2) {
      const r = K.step(s, L, 1, T0 + t)
      assert.equal(r.allowed, true)
      // Held by the dead holder until bucket B0 + 3 starts, at 30 s: ⅔ to all of the lease after t=1.
      assert.equal(r.value, t < 30 ? 1 : 2, `free slots at ${t} s`)
      s = K.adjust(r.state, L, 1, T0 + t, T0 + t)!.state
    }
  })

  it('expires when the newest taken slot’s bucket does (a moment past it), and at once when nothing is taken', () => {
    const r = takeAt(undefined, 1, 15)
    assert.ok(r.expireAt > T0 + 40 && r.expireAt < T0 + 40.1, `the slot of 15 s (bucket 10–20 s) expires at 40 s: ${r.expireAt}`)
    const back = K.adjust(r.state, L, 1, T0 + 16, T0 + 15)!
    assert.ok(back.expireAt > T0 + 30 && back.expireAt < T0 + 30.1, `only the slot of 1 s is left: ${back.expireAt}`)
    const none = K.adjust(back.state, L, 1, T0 + 17, T0 + 1)!
    assert.equal(none.expireAt, T0 + 17)
  })

  it('gives back from the bucket the slot was taken in, else the newer neighbour, then the older', () => {
    const s = takeAt(undefined, 1, 12, 25).state // one slot in each of B0, B0+1, B0+2
    assert.deepEqual(s, { bucket: B0 + 2, c0: 1, c1: 1, c2: 1 })
    assert.deepEqual(K.adjust(s, L, 1, T0 + 26, T0 + 12)!.state, { bucket: B0 + 2, c0: 1, c1: 0, c2: 1 }, 'its own bucket')
    const gap = { bucket: B0 + 2, c0: 1, c1: 0, c2: 1 }
    assert.deepEqual(K.adjust(gap, L, 1, T0 + 26, T0 + 12)!.state, { bucket: B0 + 2, c0: 0, c1: 0, c2: 1 }, 'empty: the newer one')
    const old = { bucket: B0 + 2, c0: 0, c1: 0, c2: 1 }
    assert.deepEqual(K.adjust(old, L, 1, T0 + 26, T0 + 12)!.state, { bucket: B0 + 2, c0: 0, c1: 0, c2: 0 }, 'then the older one')
    assert.deepEqual(K.adjust(s, L, 1, T0 + 26, T0 + 40)!.state, { bucket: B0 + 2, c0: 0, c1: 1, c2: 1 }, 'a time ahead: the newest')
    assert.equal(K.adjust(s, L, 1, T0 + 26, T0 - 5), undefined, 'a slot whose bucket has expired has nothing to give back')
    assert.equal(K.adjust(undefined, L, 1, T0, T0), undefined, 'nothing taken')
    const over = K.adjust(K.adjust(takeAt(undefined, 0).state, L, 1, T0, T0)!.state, L, 1, T0, T0)!
    assert.deepEqual([over.state.c0, over.value], [0, 3], 'never below zero taken')
  })

  it('a renewal (give back at its time, take now) moves a slot to the newest bucket, past the lease', () => {
    let s = takeAt(undefined, 1).state
    let at = T0 + 1
    for (let t = 11; t <= 61; t += 10) {
      s = K.adjust(s, L, 1, T0 + t, at)!.state
      s = K.adjust(s, L, -1, T0 + t, T0 + t)!.state
      at = T0 + t
    }
    const r = K.step(s, L, 3, T0 + 62)
    assert.deepEqual([r.allowed, r.value], [false, 2], 'still held 61 s later, with a lease of 30 s')
    const taken = K.adjust({ bucket: B0, c0: 3, c1: 0, c2: 0 }, L, -2, T0 + 1, T0 + 1)!
    assert.deepEqual([taken.state.c0, taken.value], [5, 0], 'a renewal takes its slot whatever the limit')
  })

  it('time never runs backwards', () => {
    const s = takeAt(undefined, 25).state
    assert.deepEqual(K.step(s, L, 1, T0 + 5).state, { ...s, c0: 2 })
  })

  it('in place on packed cells (stepCells, adjustCells): the outcome, state and expiry of step and adjust, a reject writing nothing', () => {
    const op = fc.record({
      dt: fc.oneof(fc.constant(0), fc.double({ min: 0, max: 25, noNaN: true })),
      adjust: fc.integer({ min: -2, max: 3 }),
      cost: fc.integer({ min: 0, max: 3 }),
      ago: fc.double({ min: 0, max: 40, noNaN: true }),
    })
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 6 }), fc.array(op, { minLength: 1, maxLength: 40 }), (max, ops) => {
        const l = concurrencyLimit(max, 30)
        let state: SlotsState | undefined
        let expireAt = -Infinity
        const cells = new Float64Array(8).fill(-7) // a neighbour's cells at 0..3 stay as they are
        let now = T0
        for (const o of ops) {
          now += o.dt
          const live = state !== undefined && expireAt > now
          if (!live) state = undefined
          const before = Float64Array.from(cells)
          if (o.adjust === 0) {
            const r = K.step(state, l, o.cost, now)
            const out = { allowed: false, value: -1, retryAfter: -1 }
            const e = K.stepCells!(cells, 4, live, l, o.cost, now, out)
            assert.deepEqual(out, { allowed: r.allowed, value: r.value, retryAfter: r.retryAfter })
            if (!r.allowed) {
              assert.ok(Number.isNaN(e))
              assert.deepEqual(cells, before, 'a reject writes nothing')
              continue
            }
            assert.equal(e, r.expireAt)
            ;[state, expireAt] = [r.state, r.expireAt]
          } else {
            if (!live) continue // adjustCells is for a live state; the stores adjust an absent one the common way
            const r = K.adjust(state, l, o.adjust, now, now - o.ago)
            const e = K.adjustCells!(cells, 4, l, o.adjust, now, now - o.ago)
            if (r === undefined) {
              assert.ok(Number.isNaN(e))
              assert.deepEqual(cells, before, 'nothing to give back: nothing written')
              continue
            }
            assert.equal(e, r.expireAt)
            ;[state, expireAt] = [r.state, r.expireAt]
          }
          assert.deepEqual(K.load(cells, 4), state)
          assert.deepEqual([...cells.subarray(0, 4)], [-7, -7, -7, -7])
        }
      }),
      { numRuns: 500 },
    )
  })
})
