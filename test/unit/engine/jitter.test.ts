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

test('jitter is only ever added, for every reason: Retry-After is never below its base, the moment the request could pass', () => {
  const reasons = [
    'token_bucket_exceeded',
    'budget_exceeded',
    'sliding_window_exceeded',
    'loop_detected',
    'circuit_breaker_open',
    'tpd_exceeded',
  ]
  for (const reason of reasons)
    for (let n = 0; n < 200; n++) {
      const id = jitterIdentity('', `10.0.0.${n}`, '/x')
      for (const base of [1, 7, 300, 2_678_400]) assert.ok(retryAfterWithJitter(base, 'p', 'r', reason, id) >= base, `${reason} ${base}`)
    }
})

test('budget_exceeded (a period ending at a fixed instant) adds at most a minute; others up to half the wait', () => {
  let most = 0
  for (let n = 0; n < 200; n++) {
    const id = jitterIdentity('', `10.0.1.${n}`, '/x')
    most = Math.max(most, retryAfterWithJitter(2_678_400, 'p', 'r', 'budget_exceeded', id) - 2_678_400)
    assert.ok(retryAfterWithJitter(10, 'p', 'r', 'budget_exceeded', id) <= 15, 'half of a short wait')
    assert.ok(retryAfterWithJitter(3600, 'p', 'r', 'token_bucket_exceeded', id) <= 5400)
  }
  assert.ok(most > 30 && most <= 60, `a month's wait grew by ${most} s`)
})

test('tpd_exceeded (the LLM day counter, ending at UTC midnight) adds at most a minute to the reset', () => {
  let most = 0
  for (let n = 0; n < 200; n++) {
    const id = jitterIdentity('', `10.0.2.${n}`, '/v1/chat/completions')
    most = Math.max(most, retryAfterWithJitter(20_975, 'p', 'r', 'tpd_exceeded', id) - 20_975)
  }
  assert.ok(most > 30 && most <= 60, `the wait to midnight grew by ${most} s`)
})

test('the identity of a request with a query takes the query (as Fairvisor Edge takes X-Original-URI): another identity than the bare path', () => {
  const sha = (raw: string): string => createHash('sha1').update(`fairvisor-retry-jitter|${raw}`).digest('hex').slice(0, 8)
  assert.equal(identityOf(view({ path: '/reject/x', query: 'q=2', peer: '10.0.0.1' })), sha('|10.0.0.1|/reject/x?q=2'))
  assert.equal(identityOf(view({ path: '/reject/x', peer: '10.0.0.1' })), sha('|10.0.0.1|/reject/x'))
})
