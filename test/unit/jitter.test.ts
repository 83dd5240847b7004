import assert from 'node:assert/strict'
import { test } from 'node:test'
import { jitterIdentity, retryAfterWithJitter } from '../../src/engine/jitter.js'

test('Retry-After jitter reproduces the docs/behaviour.md §7 worked values', () => {
  const got = ['10.0.0.1', '10.0.0.2', '10.0.0.3', '10.0.0.4'].map((ip) =>
    retryAfterWithJitter(10, 'p', 'r', 'token_bucket_exceeded', jitterIdentity('', ip, '/x')),
  )
  assert.deepEqual(got, [11, 12, 12, 11])
})

test('budget_exceeded subtracts the jitter and never goes below 1', () => {
  const id = jitterIdentity('', '10.0.0.1', '/x')
  const plus = retryAfterWithJitter(10, 'p', 'r', 'budget_exceeded', id)
  assert.ok(plus <= 10 && plus >= 5)
  assert.equal(retryAfterWithJitter(1, 'p', 'r', 'budget_exceeded', id), 1)
})
