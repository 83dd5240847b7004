/** The process's count of held requests: bounded, one count for every thread on the shared buffer, a dead worker's slots given back. */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { HoldSlots } from '../../../src/decision/hold-slots.js'

test('at most max slots; a slot given back can be taken again', () => {
  const s = new HoldSlots(2)
  assert.deepEqual([s.take(), s.take(), s.take()], [true, true, false])
  assert.equal(s.total, 2)
  s.give()
  assert.equal(s.take(), true)
  assert.equal(new HoldSlots(0).take(), false, 'FAIRVISOR_MAX_DELAYED=0: nothing is held')
})

test('two threads on one buffer share the bound; a dead worker’s slots go back to the process', () => {
  const shared = HoldSlots.shared(2)
  const one = new HoldSlots(3, shared, 1)
  const two = new HoldSlots(3, shared, 2)
  assert.deepEqual([one.take(), one.take(), two.take(), two.take()], [true, true, true, false])
  assert.equal(HoldSlots.releaseOf(shared, 1), 2)
  assert.equal(two.total, 1)
  assert.deepEqual([two.take(), two.take(), two.take()], [true, true, false])
})
