import assert from 'node:assert/strict'
import { test } from 'node:test'
import { createHash } from 'node:crypto'
import { jitterIdentity, retryAfterWithJitter } from '../../../src/engine/jitter.js'
import { identityOf } from '../../../src/engine/kill-switch.js'
import { view } from '../../helpers/engine-harness.js'

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

test('the identity of a request with a query takes the query (as Fairvisor Edge takes X-Original-URI): another identity than the bare path', () => {
  const sha = (raw: string): string => createHash('sha1').update(`fairvisor-retry-jitter|${raw}`).digest('hex').slice(0, 8)
  assert.equal(identityOf(view({ path: '/reject/x', query: 'q=2', peer: '10.0.0.1' })), sha('|10.0.0.1|/reject/x?q=2'))
  assert.equal(identityOf(view({ path: '/reject/x', peer: '10.0.0.1' })), sha('|10.0.0.1|/reject/x'))
})
