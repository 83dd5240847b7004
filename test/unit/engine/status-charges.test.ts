/**
 * Rules with count_statuses / refund_statuses through the real engine and
 * memory store: an allowed request carries the charges its response's status
 * settles (engine/status-charges.ts); a reject carries none; refundsFor says
 * which a status gives back; given back, the budget is as if never spent.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { refundAdjustments, refundsFor } from '../../../src/engine/status-charges.js'
import { applyAsync } from '../../../src/store/store.js'
import { bundle, compile, Harness, policy, rule, T0, tb } from '../../helpers/engine-harness.js'

const login = (extra: object) => rule('failed_logins', ['header:x-user'], tb(0.001, 2), extra)

test('count_statuses: every allowed request carries its charge; a counted status keeps it, any other gives it back', async () => {
  const h = new Harness(compile(bundle([policy('login', [login({ count_statuses: ['401', '403'] })])])))
  const settle = async (status: number): Promise<boolean> => {
    const d = h.run({ headers: { 'x-user': 'a' } })
    if (!d.allowed) return false
    const charges = d.statusCharges!
    assert.equal(charges.length, 1)
    assert.deepEqual([charges[0]!.policyId, charges[0]!.ruleName, charges[0]!.charge.key], ['login', 'failed_logins', 'tb:failed_logins:a'])
    await new Promise<void>((resolve) => h.store.adjust(refundAdjustments(refundsFor(charges, status)), T0 / 1000, () => resolve()))
    return true
  }
  for (let i = 0; i < 20; i++) assert.equal(await settle(200), true, `a successful login ${i + 1} is never limited`)
  assert.equal(await settle(401), true)
  assert.equal(await settle(403), true)
  const over = h.run({ headers: { 'x-user': 'a' } })
  assert.deepEqual(
    [over.allowed, over.reason, over.statusCharges],
    [false, 'token_bucket_exceeded', undefined],
    'two failures used the budget',
  )
})

test('refund_statuses: a 5xx gives the charge back, a 2xx or 4xx keeps it', () => {
  const h = new Harness(compile(bundle([policy('api', [login({ refund_statuses: ['5xx'] })])])))
  const charges = h.run({ headers: { 'x-user': 'a' } }).statusCharges!
  assert.equal(refundsFor(charges, 502).length, 1)
  assert.equal(refundsFor(charges, 503).length, 1)
  assert.equal(refundsFor(charges, 200).length, 0)
  assert.equal(refundsFor(charges, 429).length, 0)
  assert.equal(refundsFor(charges, undefined).length, 0, 'a status never known keeps the charge')
})

test('count_statuses with no status known keeps the charge: a client that hangs up does not go uncounted', () => {
  const h = new Harness(compile(bundle([policy('login', [login({ count_statuses: ['401'] })])])))
  const charges = h.run({ headers: { 'x-user': 'a' } }).statusCharges!
  assert.equal(refundsFor(charges, undefined).length, 0)
  assert.equal(refundsFor(charges, 200).length, 1)
})

test('only rules with a status option carry charges; a shadow policy’s do too when its group passed', async () => {
  const b = bundle([
    policy('api', [rule('plain', ['header:x-user'], tb(1, 10)), login({ count_statuses: ['401'] })]),
    policy('preview', [rule('preview_login', ['header:x-user'], tb(0.001, 1), { refund_statuses: ['5xx'] })], { mode: 'shadow' }),
  ])
  const h = new Harness(compile(b))
  const d = h.run({ headers: { 'x-user': 'a' } })
  assert.deepEqual(
    d.statusCharges!.map((c) => c.charge.key),
    ['tb:failed_logins:a', 'shadow:tb:preview_login:a'],
  )
  const again = h.run({ headers: { 'x-user': 'a' } })
  assert.deepEqual(
    again.statusCharges!.map((c) => c.charge.key),
    ['tb:failed_logins:a'],
    'the shadow group rejected: its charge was not committed',
  )
  const [o] = await applyAsync(
    h.store,
    [{ key: 'tb:plain:a', limit: h.bundle.policies[0]!.rules[0]!.limit, cost: 0, shadow: false }],
    T0 / 1000,
  )
  assert.equal(o!.value, 8, 'the plain rule charged as ever')
})
