/**
 * A check the in-process store has no room for (every candidate counter
 * still holds information) is decided fail-closed: 503 store_full with a
 * Retry-After, whatever FAIRVISOR_FAIL_POLICY says; in a shadow policy it is
 * a would-be reject reported as store_full. Real engine, real memory store
 * sized for three counters.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { Decision } from '../../../src/engine/decision.js'
import { Engine } from '../../../src/engine/evaluate.js'
import { decisionResponse } from '../../../src/decision/response.js'
import { ENTRY_OVERHEAD_BYTES, MemoryStore } from '../../../src/store/memory/store.js'
import { bundle, compile, policy, Recorder, rule, T0, tb, view } from '../../helpers/engine-harness.js'

function run(mode: 'enforce' | 'shadow'): { decide: (user: string, atS?: number) => Decision; obs: Recorder; store: MemoryStore } {
  const b = compile(bundle([policy('api', [rule('per_user', ['header:x-user'], tb(1 / 600, 1))], { mode })]))
  const key = `${mode === 'shadow' ? 'shadow:' : ''}tb:per_user:u0`
  const store = new MemoryStore({ maxBytes: 3 * (ENTRY_OVERHEAD_BYTES + key.length) })
  const obs = new Recorder()
  const engine = new Engine({ store, failPolicy: 'open', observer: obs })
  const decide = (user: string, atS = 0): Decision => {
    let d: Decision | undefined
    engine.evaluate(b, view({ headers: { 'x-user': user } }), T0 + atS * 1000, false, (x) => (d = x))
    return d!
  }
  return { decide, obs, store }
}

test('no room for a new counter: 503 store_full with Retry-After, even with FAIRVISOR_FAIL_POLICY=open; the spent counters are kept', () => {
  const { decide, store } = run('enforce')
  for (const u of ['u0', 'u1', 'u2']) assert.equal(decide(u).allowed, true)
  const d = decide('u3', 10)
  assert.equal(d.allowed, false)
  assert.equal(d.status, 503)
  assert.equal(d.reason, 'store_full')
  assert.equal(d.policyId, 'api')
  assert.equal(d.ruleName, 'per_user')
  assert.equal(d.retryAfterS, 590, 'when the first of the full counters refills')
  const r = decisionResponse(d, { exposeReason: true })
  assert.equal(r.status, 503)
  const h = Object.fromEntries(r.headers.flatMap((v, i, a) => (i % 2 ? [] : [[v.toLowerCase(), a[i + 1]]])))
  assert.equal(h['retry-after'], '590')
  assert.equal(h['x-fairvisor-reason'], 'store_full')
  assert.equal(JSON.parse(r.body).error, 'service_unavailable')
  for (const u of ['u0', 'u1', 'u2']) assert.equal(decide(u, 10).reason, 'token_bucket_exceeded', `${u} is still limited`)
  assert.equal(store.full, 1)
  // Once the first counter refills, its room is taken by the new key.
  assert.equal(decide('u3', 601).allowed, true)
})

test('in a shadow policy a check without room is a would-be reject, reported as store_full; the request passes', () => {
  const { decide, obs } = run('shadow')
  for (const u of ['u0', 'u1', 'u2']) decide(u)
  const d = decide('u3')
  assert.equal(d.allowed, true)
  assert.deepEqual(
    obs.shadow.map((s) => s.reason),
    ['store_full'],
  )
})
