/**
 * What a reservation settles at (docs/llm.md "Settlement"): final usage, else the count (with
 * any completion already reported), else nothing for an error or no answer, else the reservation.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { LlmReservation } from '../../../src/engine/decision.js'
import { useOf } from '../../../src/llm/settlement.js'

const r = { prompt: 20, reserved: 520 } as LlmReservation

test('final usage wins; otherwise a stream settles on its count and the reported prompt, or the estimate', () => {
  assert.deepEqual(useOf(r, { prompt: 19, completion: 84 }, true, 90, 200), { used: 103, by: 'usage', completion: 84 })
  assert.deepEqual(useOf(r, { prompt: 19, completion: 84 }, false, 90, 200), { used: 109, by: 'counted', completion: 90 })
  assert.deepEqual(useOf(r, { prompt: 25, completion: 1 }, false, 50, 200), { used: 75, by: 'counted', completion: 50 })
  assert.deepEqual(useOf(r, { prompt: undefined, completion: undefined }, true, 12, 200), { used: 32, by: 'counted', completion: 12 })
})

test('no usage and no stream: an error or no answer gives it all back, a JSON answer keeps the reservation', () => {
  const none = { prompt: undefined, completion: undefined }
  assert.equal(useOf(r, none, true, undefined, 500).by, 'refunded')
  assert.equal(useOf(r, none, true, undefined, 0).used, 0)
  assert.deepEqual(useOf(r, none, true, undefined, 200), { used: 520, by: 'reserved', completion: undefined })
})
