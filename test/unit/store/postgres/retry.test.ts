/**
 * Which PostgreSQL errors are sent again (retry.ts) and the pauses before them: drawn below a
 * bound that doubles from 2 ms to at most 50 ms, and never past the call's deadline or its sends.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { backoffMs, MAX_SENDS, retryable, retryPause } from '../../../../src/store/postgres/retry.js'

test('serialization failures and deadlocks are retried; nothing else is', () => {
  for (const code of ['40001', '40P01']) assert.equal(retryable(Object.assign(new Error('x'), { code })), true, code)
  for (const code of ['57014', '23505', '0A000', undefined])
    assert.equal(retryable(Object.assign(new Error('x'), { code })), false, String(code))
  assert.equal(retryable(null), false)
})

test('the pause is drawn below a bound that doubles from 2 ms and stops at 50 ms', () => {
  const top = (attempt: number): number => backoffMs(attempt, () => 0.999999)
  assert.deepEqual(
    [1, 2, 3, 4, 5, 6, 7].map((a) => Math.round(top(a))),
    [2, 4, 8, 16, 32, 50, 50],
  )
  assert.equal(
    backoffMs(3, () => 0),
    0,
  )
  assert.equal(
    backoffMs(3, () => 0.5),
    4,
  )
})

test('no retry once the sends are used up or when it could not leave before the deadline', () => {
  const half = (): number => 0.5
  assert.equal(retryPause(1, 100, 0, half), 1)
  assert.equal(retryPause(MAX_SENDS - 1, 1000, 0, half), 25)
  assert.equal(retryPause(MAX_SENDS, 1000, 0, half), undefined, 'sends used up')
  assert.equal(retryPause(4, 100, 95, half), undefined, '8 ms of pause would pass the deadline 5 ms away')
  assert.equal(retryPause(4, 100, 91, half), 8)
})
