/**
 * GET /v1/admin/top's workings (src/admin/top.ts): the engine's rejects (enforced and shadow, through
 * the real engine on a memory store) counted per policy, rule, reason and key, credentials shown as
 * their logged hash; the answer's shape and `n`.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { recordRejects, rejectedKeys, topAnswer, topCount } from '../../../src/admin/top.js'
import type { EngineObserver } from '../../../src/engine/decision.js'
import { AdminRequestError } from '../../../src/errors.js'
import { shortHash } from '../../../src/engine/log-key.js'
import { noStats } from '../../../src/observe/decision-stats.js'
import { bundle, compile, Harness, policy, rule, T0, tb } from '../../helpers/engine-harness.js'

const settings = { adminToken: 't'.repeat(16), adminTopKeys: 100, adminTopWindowS: 300 }

test('no admin token: no sketch, so rejects cost nothing more', () => {
  assert.equal(rejectedKeys({ ...settings, adminToken: undefined }, T0), undefined)
  assert.ok(rejectedKeys(settings, T0))
})

test("the engine's enforced and shadow rejects, per policy, rule, reason and key; credentials hashed; most first", () => {
  const h = new Harness(
    compile(
      bundle([
        policy('api', [rule('per_user', ['header:x-user'], tb(0.001, 1)), rule('per_key', ['header:x-api-key'], tb(0.001, 1))]),
        policy('watch', [rule('per_ip', ['ip:address'], tb(0.001, 1))], { mode: 'shadow' }, { pathPrefix: '/watched/' }),
      ]),
    ),
  )
  const keys = rejectedKeys(settings, T0)!
  ;(h.obs as EngineObserver).rejected = recordRejects(keys)
  for (let i = 0; i < 4; i++) h.run({ headers: { 'x-user': 'alice' } })
  for (let i = 0; i < 2; i++) h.run({ headers: { 'x-api-key': 'sk-live-1' } })
  for (let i = 0; i < 3; i++) h.run({ path: '/watched/x', peer: '10.9.9.9' })
  const view = { top: keys.snapshot(T0 + 1), stats: noStats(), reloads: [] }
  const answer = topAnswer(view, 20, 300)
  assert.deepEqual(answer, {
    window_seconds: 300,
    entries: [
      { policy: 'api', rule: 'per_user', reason: 'token_bucket_exceeded', key: 'alice', count: 3, error: 0 },
      { policy: 'watch', rule: 'per_ip', reason: 'token_bucket_exceeded', key: '10.9.9.9', count: 2, error: 0 },
      { policy: 'api', rule: 'per_key', reason: 'token_bucket_exceeded', key: shortHash('sk-live-1'), count: 1, error: 0 },
    ],
  })
  assert.doesNotMatch(JSON.stringify(answer), /sk-live-1/, 'never a credential in clear')
  assert.equal((topAnswer(view, 1, 300).entries as unknown[]).length, 1)
})

test('n: 20 when absent, else a whole number from 1 to 1000', () => {
  assert.equal(topCount(new URLSearchParams('')), 20)
  assert.equal(topCount(new URLSearchParams('n=5')), 5)
  assert.equal(topCount(new URLSearchParams('n=1000')), 1000)
  for (const bad of ['n=0', 'n=1001', 'n=-1', 'n=2.5', 'n=x', 'n=1e2'])
    assert.throws(
      () => topCount(new URLSearchParams(bad)),
      (e: unknown) => e instanceof AdminRequestError && e.adminCode === 'admin_bad_request',
      bad,
    )
})

test('a reload compiles the rules anew: a key keeps counting in one entry', () => {
  const doc = bundle([policy('api', [rule('per_user', ['header:x-user'], tb(0.001, 1))])])
  const keys = rejectedKeys(settings, T0)!
  const hook = recordRejects(keys)
  for (const compiled of [compile(doc), compile(doc)]) {
    const h = new Harness(compiled)
    ;(h.obs as EngineObserver).rejected = hook
    for (let i = 0; i < 3; i++) h.run({ headers: { 'x-user': 'alice' } })
  }
  const entries = topAnswer({ top: keys.snapshot(T0 + 1), stats: noStats(), reloads: [] }, 20, 300).entries as {
    key: string
    count: number
  }[]
  assert.deepEqual(
    entries.map((e) => [e.key, e.count]),
    [['alice', 4]],
  )
})
