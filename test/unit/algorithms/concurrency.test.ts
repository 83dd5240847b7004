/**
 * The `concurrency` algorithm (algorithms/concurrency.ts): its config
 * through the bundle schema and validation, per front end (the decision
 * service and gRPC refuse a slot given back at the exchange's end, at the
 * pointer of `release`); and through the engine on a memory store: the
 * slots an allowed request holds (Decision.held), what a rejected one took
 * (a shadow rule's slot, to give back at once), and its headers.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import type { BundleUse } from '../../../src/algorithms/algorithm.js'
import { CONCURRENCY } from '../../../src/algorithms/concurrency.js'
import { validateBundle } from '../../../src/bundle/validate.js'
import { bundle, compile, Harness, policy, T0 } from '../../helpers/engine-harness.js'

const rule = (name: string, config: object): object => ({
  name,
  limit_keys: ['header:x-tenant'],
  algorithm: 'concurrency',
  algorithm_config: config,
})
const doc = (config: object): object => bundle([policy('p', [rule('cc', config)])])
const PROXY_ONLY: BundleUse = { mode: 'reverse_proxy', grpc: false }
const issues = (config: object, use: BundleUse = PROXY_ONLY) => validateBundle(doc(config), T0, use.mode, use.grpc)
const DECISION: BundleUse = { mode: 'decision_service', grpc: false }
const PROXY_GRPC: BundleUse = { mode: 'reverse_proxy', grpc: true }
const POINTER = '/policies/0/spec/rules/0/algorithm_config/release'

describe('concurrency config', () => {
  it('a reverse proxy takes the defaults; the schema refuses a bad max_concurrent or lease_seconds', () => {
    assert.deepEqual(issues({ max_concurrent: 5 }), [])
    assert.deepEqual(CONCURRENCY.normalise({ max_concurrent: 5 }), { ...CONCURRENCY.normalise({ max_concurrent: 5, lease_seconds: 300 }) })
    assert.equal(CONCURRENCY.normalise({ max_concurrent: 5 }).release, 'exchange')
    assert.match(issues({ max_concurrent: 0 })[0]!.message, /max_concurrent must be at least 1/)
    assert.match(issues({ max_concurrent: 1.5 })[0]!.message, /max_concurrent must be an integer/)
    assert.match(issues({ max_concurrent: 2, lease_seconds: 0.5 })[0]!.message, /lease_seconds must be at least 1/)
    assert.match(issues({ lease_seconds: 10 })[0]!.message, /max_concurrent is required/)
  })

  for (const [what, use, name] of [
    ['the decision service', DECISION, /the decision service \(\/v1\/decision\)/],
    ['gRPC beside the proxy', PROXY_GRPC, /gRPC \(ext_authz, the Rate Limit Service; FAIRVISOR_GRPC_PORT\)/],
  ] as const) {
    it(`${what} refuses a slot given back at the exchange's end, at the pointer of release; "release": "lease" passes`, () => {
      for (const config of [{ max_concurrent: 5 }, { max_concurrent: 5, release: 'exchange' }]) {
        const [i, ...rest] = issues(config, use)
        assert.deepEqual(rest, [])
        assert.equal(i!.pointer, POINTER)
        assert.equal(i!.warning, undefined, 'an error: the policy is dropped')
        assert.match(i!.message, name)
        assert.match(i!.message, /set "release": "lease"/)
      }
      assert.deepEqual(issues({ max_concurrent: 5, release: 'lease' }, use), [])
    })
  }
})

describe('concurrency through the engine', () => {
  const h = new Harness(compile(doc({ max_concurrent: 2, lease_seconds: 30 })))
  const req = { headers: { 'x-tenant': 'acme' } }

  it('an allowed request holds its slot, named with the time it was taken and renewed every third of the lease', () => {
    const d = h.run(req, 1)
    assert.equal(d.allowed, true)
    assert.deepEqual(d.limit, { policyId: 'p', limit: 2, remaining: 1, resetS: 1, windowS: 1 })
    assert.deepEqual(
      d.held?.map((s) => [s.policyId, s.key, s.amount, s.at, s.renewS]),
      [['p', 'cc:cc:l30:acme', 1, T0 / 1000 + 1, 10]],
    )
  })

  it('no slot free: 429 concurrency_exceeded with the free slots, Retry-After 1 jittered, nothing held', () => {
    h.run(req, 2)
    const d = h.run(req, 3)
    assert.deepEqual([d.allowed, d.status, d.reason], [false, 429, 'concurrency_exceeded'])
    assert.deepEqual(d.limit, { policyId: 'p', limit: 2, remaining: 0, resetS: 1, windowS: 1 })
    assert.ok(d.retryAfterS === 1 || d.retryAfterS === 2, `Retry-After ${d.retryAfterS}`)
    assert.equal(d.held, undefined)
  })

  it('a request an enforce rule rejects holds the slot its shadow rule took, to give back at once', () => {
    const both = compile(
      bundle([
        policy('enforce', [
          {
            name: 'empty',
            limit_keys: ['header:x-tenant'],
            algorithm: 'token_bucket',
            algorithm_config: { tokens_per_second: 0.001, burst: 1 },
          },
        ]),
        policy('watch', [rule('cc_shadow', { max_concurrent: 5 })], { mode: 'shadow' }),
      ]),
    )
    const s = new Harness(both)
    assert.equal(s.run(req).held?.length, 1, 'allowed: the shadow slot is held too')
    const d = s.run(req)
    assert.equal(d.allowed, false)
    assert.deepEqual(
      d.held?.map((x) => x.key),
      ['shadow:cc:cc_shadow:l300:acme'],
    )
  })

  it('"release": "lease" holds nothing to give back', () => {
    const l = new Harness(compile(doc({ max_concurrent: 2, release: 'lease' })))
    const d = l.run(req)
    assert.deepEqual([d.allowed, d.held], [true, undefined])
  })
})
