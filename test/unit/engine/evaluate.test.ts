/**
 * Engine.evaluate (docs/behaviour.md §4) with a real MemoryStore and bundles compiled by
 * loadBundleBytes; time is passed in, so every expectation is exact. A store failure on a
 * Redis store with no server behind it.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { bundle, compile, Harness, policy, rule, T0, tb, view } from '../../helpers/engine-harness.js'
import { Engine } from '../../../src/engine/evaluate.js'
import type { Decision } from '../../../src/engine/decision.js'
import { MemoryStore } from '../../../src/store/memory/store.js'
import { RedisStore } from '../../../src/store/redis/store.js'
import { parseRedisUrl } from '../../../src/store/redis/url.js'

test('policies are evaluated in id order whatever their order in the file; the first reject wins', () => {
  const h = new Harness(
    compile(bundle([policy('b', [rule('rb', ['ip:address'], tb(1, 1))]), policy('a', [rule('ra', ['ip:address'], tb(1, 1))])])),
  )
  const first = h.run()
  assert.equal(first.allowed, true)
  assert.deepEqual(first.matchedPolicies, ['a', 'b'])
  const second = h.run()
  assert.equal(second.allowed, false)
  assert.equal(second.reason, 'token_bucket_exceeded')
  assert.equal(second.policyId, 'a')
  assert.equal(second.ruleName, 'ra')
})

test('policy id order is by code unit, so "B" sorts before "a"', () => {
  const h = new Harness(compile(bundle([policy('a', [rule('r1', [], tb(1, 5))]), policy('B', [rule('r2', [], tb(1, 5))])])))
  assert.deepEqual(h.run().matchedPolicies, ['B', 'a'])
})

test('match compares as strings: JSON 1 equals claim "1" and claim 1; true equals "true"', () => {
  const doc = bundle([
    policy('p', [
      rule('by_num', ['jwt:sub'], tb(1, 5), { match: { 'jwt:tier': 1 } }),
      rule('by_bool', ['jwt:sub'], tb(1, 7), { match: { 'jwt:beta': true } }),
    ]),
  ])
  const h = new Harness(compile(doc))
  assert.equal(h.run({ jwt: { sub: 'u1', tier: '1' } }).ruleName, 'by_num')
  assert.equal(h.run({ jwt: { sub: 'u2', tier: 1 } }).ruleName, 'by_num')
  assert.equal(h.run({ jwt: { sub: 'u3', beta: 'true' } }).ruleName, 'by_bool')
  assert.equal(h.run({ jwt: { sub: 'u4', beta: true } }).ruleName, 'by_bool')
  assert.equal(h.run({ jwt: { sub: 'u5', tier: 2, beta: false } }).limit, undefined, 'no rule selected')
  assert.equal(h.run({ jwt: { sub: 'u6', tier: '01' } }).limit, undefined, '"01" is not "1"')
})

test('a missing match value means the rule is not selected, even when the expected value is ""', () => {
  const h = new Harness(compile(bundle([policy('p', [rule('r', [], tb(1, 5), { match: { 'header:x-plan': '' } })])])))
  assert.equal(h.run().limit, undefined)
  assert.equal(h.run({ headers: { 'x-plan': '' } }).limit, undefined)
})

test('match keys of every source are read, even when no rule limits on that source', () => {
  // Every rule limits on jwt:sub only; the match keys are header, query, ip and jwt.
  const doc = bundle([
    policy('p', [
      rule('h', ['jwt:sub'], tb(1, 2), { match: { 'header:x-plan': 'pro' } }),
      rule('q', ['jwt:sub'], tb(1, 3), { match: { 'query:tier': 'gold' } }),
      rule('i', ['jwt:sub'], tb(1, 4), { match: { 'ip:address': '192.0.2.7' } }),
      rule('j', ['jwt:sub'], tb(1, 6), { match: { 'jwt:org': 'acme' } }),
    ]),
  ])
  const h = new Harness(compile(doc))
  assert.equal(h.run({ jwt: { sub: 'a' }, headers: { 'X-Plan': 'pro' } }).ruleName, 'h')
  assert.equal(h.run({ jwt: { sub: 'b' }, query: 'tier=gold' }).ruleName, 'q')
  assert.equal(h.run({ jwt: { sub: 'c' }, peer: '192.0.2.7' }).ruleName, 'i')
  assert.equal(h.run({ jwt: { sub: 'd', org: 'acme' } }).ruleName, 'j')
})

test('fallback_limit applies only when no rule was selected', () => {
  const doc = bundle([
    policy('p', [rule('pro', ['jwt:sub'], tb(1, 10), { match: { 'jwt:plan': 'pro' } })], {
      fallback_limit: { limit_keys: ['jwt:sub'], algorithm: 'token_bucket', algorithm_config: tb(1, 2) },
    }),
  ])
  const h = new Harness(compile(doc))
  const pro = h.run({ jwt: { sub: 'u', plan: 'pro' } })
  assert.equal(pro.ruleName, 'pro')
  assert.equal(pro.limit?.remaining, 9)
  const free = h.run({ jwt: { sub: 'u', plan: 'free' } })
  assert.equal(free.ruleName, 'p:fallback_limit')
  assert.equal(free.limit?.remaining, 1)
  assert.equal(h.run({ jwt: { sub: 'u' } }).limit?.remaining, 0, 'no plan claim: fallback too')
  assert.equal(h.run({ jwt: { sub: 'u' } }).allowed, false)
  assert.equal(h.run({ jwt: { sub: 'u', plan: 'pro' } }).limit?.remaining, 8, 'the pro bucket was never touched by the fallback')
})

test('a selected rule with a missing limit key is skipped (fail-open) and reported with its key', () => {
  const h = new Harness(compile(bundle([policy('p', [rule('per_key', ['header:x-api-key', 'jwt:sub'], tb(1, 1))])])))
  for (let i = 0; i < 3; i++) {
    const d = h.run({ headers: { 'x-api-key': 'k1' } })
    assert.equal(d.allowed, true)
    assert.equal(d.limit, undefined)
  }
  assert.deepEqual(h.obs.missing, ['jwt:sub', 'jwt:sub', 'jwt:sub'])
  assert.equal(h.run({ headers: { 'x-api-key': '' }, jwt: { sub: 'u' } }).limit, undefined, 'an empty value is missing')
  assert.equal(h.obs.missing[3], 'header:x-api-key')
})

test('the composite key is the limit-key values joined with | in limit_keys order', () => {
  const h = new Harness(compile(bundle([policy('p', [rule('combo', ['jwt:org_id', 'header:x-api-key'], tb(1, 2))])])))
  assert.equal(h.remaining({ jwt: { org_id: 'o1' }, headers: { 'x-api-key': 'k1' } }), 1)
  assert.equal(h.remaining({ jwt: { org_id: 'o1' }, headers: { 'x-api-key': 'k2' } }), 1, 'another key of the same org is another bucket')
  assert.equal(h.remaining({ jwt: { org_id: 'o1' }, headers: { 'x-api-key': 'k1' } }), 0)
  const planned: string[] = []
  const engine = new Engine({
    store: new MemoryStore({ maxBytes: 1 << 20 }),
    failPolicy: 'open',
    observer: { ...h.obs, descriptorMissing() {}, shadowReject() {}, storeError() {}, limitPlanned: (l) => planned.push(l.key) },
  })
  engine.evaluate(h.bundle, view({ jwt: { org_id: 'o1' }, headers: { 'x-api-key': 'k1' } }), T0, false, () => undefined)
  assert.deepEqual(planned, ['tb:combo:o1|k1'])
})

test('no half-spend: when the second rule rejects, the first rule of the request is not charged', () => {
  const doc = bundle([policy('p', [rule('wide', ['ip:address'], tb(1, 5)), rule('narrow', ['header:x-k'], tb(1, 1))])])
  const h = new Harness(compile(doc))
  assert.equal(h.remaining({ headers: { 'x-k': 'a' } }), 0) // wide 4, narrow 0
  for (let i = 0; i < 3; i++) {
    const d = h.run({ headers: { 'x-k': 'a' } })
    assert.equal(d.allowed, false)
    assert.equal(d.ruleName, 'narrow')
  }
  // Only `wide` applies without x-k: it must still hold 4 tokens, so this leaves 3.
  assert.equal(h.remaining({}), 3)
})

test('no half-spend across policies: a reject in policy b leaves policy a untouched', () => {
  const h = new Harness(
    compile(
      bundle([
        policy('a', [rule('ra', ['ip:address'], tb(1, 5))]),
        policy('b', [rule('rb', ['ip:address'], tb(1, 1))], {}, { pathPrefix: '/b/' }),
      ]),
    ),
  )
  assert.equal(h.run({ path: '/b/x' }).allowed, true)
  assert.equal(h.run({ path: '/b/x' }).allowed, false)
  assert.equal(h.run({ path: '/b/x' }).allowed, false)
  assert.equal(h.remaining({ path: '/other' }), 3, 'a was charged once, by the allowed request only')
})

test('an allowed request carries the headers of the most restrictive limit (lowest remaining)', () => {
  const h = new Harness(
    compile(
      bundle([
        policy('a', [rule('roomy', ['ip:address'], tb(1, 10))]),
        policy('b', [rule('tight', ['ip:address'], tb(2, 3)), rule('mid', ['ip:address'], tb(1, 6))]),
      ]),
    ),
  )
  const d = h.run()
  assert.deepEqual(d.limit, { policyId: 'b', limit: 3, remaining: 2, resetS: 1, windowS: 2 })
  assert.equal(d.ruleName, 'tight')
})

test('a reject carries the rejecting limit with remaining 0 and a jittered Retry-After', () => {
  const h = new Harness(compile(bundle([policy('p', [rule('r', ['ip:address'], tb(0.5, 1))])])))
  h.run()
  const d = h.run({}, 0.5)
  assert.equal(d.status, 429)
  assert.deepEqual(d.limit, { policyId: 'p', limit: 1, remaining: 0, resetS: 2, windowS: 2 })
  assert.ok(d.retryAfterS! >= 2 && d.retryAfterS! <= 3, `Retry-After ${d.retryAfterS}`)
})

test('cost from a header: the number when positive, default_cost when absent, non-numeric, zero or negative', () => {
  const doc = bundle([policy('p', [rule('r', ['header:x-user'], tb(1, 100, { cost_source: 'header:X-Cost', default_cost: 2 }))])])
  const cases: [string | undefined, number][] = [
    ['5', 95],
    [undefined, 98],
    ['abc', 98],
    ['0', 98],
    ['-3', 98],
    ['2.5', 97],
    ['', 98],
    ['1e2', 98],
    [' 7 ', 93],
  ]
  for (const [cost, want] of cases) {
    const h = new Harness(compile(doc))
    const headers: Record<string, string> = { 'x-user': 'u' }
    if (cost !== undefined) headers['x-cost'] = cost
    assert.equal(h.remaining({ headers }), want, `X-Cost ${JSON.stringify(cost)}`)
  }
})

test('cost from a query parameter, and a cost above burst always rejects', () => {
  const doc = bundle([policy('p', [rule('r', ['ip:address'], tb(1, 10, { cost_source: 'query:weight' }))])])
  const h = new Harness(compile(doc))
  assert.equal(h.remaining({ query: 'weight=4' }), 6)
  assert.equal(h.remaining({ query: 'a=1' }), 5, 'default_cost defaults to 1')
  assert.equal(h.remaining({ query: 'weight=11' }, 3600), 'rejected')
  assert.equal(h.remaining({ query: 'weight=10' }, 3600), 0)
})

test('fixed_cost is charged per request', () => {
  const h = new Harness(compile(bundle([policy('p', [rule('r', ['ip:address'], tb(1, 10, { fixed_cost: 3 }))])])))
  assert.equal(h.remaining(), 7)
  assert.equal(h.remaining(), 4)
  assert.equal(h.remaining(), 1)
  assert.equal(h.remaining(), 'rejected')
})

test('rps is an alias of tokens_per_second in the config that actually runs', () => {
  const h = new Harness(compile(bundle([policy('p', [rule('r', ['ip:address'], { rps: 2, burst: 2 })])])))
  assert.equal(h.remaining(), 1)
  assert.equal(h.remaining(), 0)
  assert.equal(h.remaining({}, 0.5), 0)
  assert.equal(h.remaining({}, 1), 0)
})

test('shadow: never rejects, counts on shadow: keys apart from enforce counters, reports each would-be reject', () => {
  // Same rule name in both policies: rule names are global, but the shadow prefix keeps them apart.
  const h = new Harness(
    compile(
      bundle([
        policy('enf', [rule('shared', ['ip:address'], tb(1, 2))]),
        policy('shd', [rule('shared', ['ip:address'], tb(1, 1))], { mode: 'shadow' }),
      ]),
    ),
  )
  assert.equal(h.remaining(), 1, 'enforce counter unaffected by the shadow charge')
  assert.deepEqual(h.obs.shadow, [])
  assert.equal(h.remaining(), 0)
  assert.deepEqual(h.obs.shadow, [
    { policyId: 'shd', ruleName: 'shared', reason: 'token_bucket_exceeded', key: 'shadow:tb:shared:10.0.0.1' },
  ])
  const third = h.run()
  assert.equal(third.allowed, false)
  assert.equal(third.policyId, 'enf')
  assert.equal(h.obs.shadow.length, 2, 'the shadow would-reject is reported even when enforce rejects')
})

test('a shadow-only request is allowed without rate-limit headers', () => {
  const h = new Harness(compile(bundle([policy('s', [rule('r', ['ip:address'], tb(1, 1))], { mode: 'shadow' })])))
  for (let i = 0; i < 5; i++) {
    const d = h.run()
    assert.equal(d.allowed, true)
    assert.equal(d.status, 200)
    assert.equal(d.mode, 'shadow')
    assert.equal(d.limit, undefined)
    assert.equal(d.retryAfterS, undefined)
  }
  assert.equal(h.obs.shadow.length, 4)
})

test('global_shadow makes every policy shadow until its expires_at, then enforcement resumes', () => {
  const until = new Date(T0 + 60_000).toISOString().replace('.000Z', 'Z')
  const doc = bundle([policy('p', [rule('r', ['ip:address'], tb(1, 1))])], {
    global_shadow: { enabled: true, reason: 'rollout', expires_at: until },
  })
  const h = new Harness(compile(doc))
  for (let i = 0; i < 3; i++) assert.equal(h.run({}, 10).allowed, true)
  assert.equal(h.obs.shadow.length, 2)
  assert.equal(h.obs.shadow[0]!.key, 'shadow:tb:r:10.0.0.1')
  assert.equal(h.run({}, 60).allowed, true, 'first enforce request after expiry: fresh enforce bucket')
  assert.equal(h.run({}, 60).allowed, false)
})

test('global_shadow that is disabled has no effect', () => {
  const doc = bundle([policy('p', [rule('r', ['ip:address'], tb(1, 1))])], { global_shadow: { enabled: false } })
  const h = new Harness(compile(doc))
  h.run()
  assert.equal(h.run().allowed, false)
})

const KS = (extra: object): object => ({ scope_key: 'header:x-tenant', scope_value: 'acme', reason: 'abuse', ...extra })

test('kill switch: exact, case-sensitive scope match rejects before any policy, Retry-After from base 3600', () => {
  const h = new Harness(compile(bundle([], { kill_switches: [KS({})] })))
  const d = h.run({ headers: { 'X-Tenant': 'acme' } })
  assert.equal(d.status, 429)
  assert.equal(d.reason, 'kill_switch')
  assert.ok(d.retryAfterS! >= 3600 && d.retryAfterS! <= 5400)
  assert.equal(h.run({ headers: { 'X-Tenant': 'Acme' } }).reason, 'no_matching_policy')
  assert.equal(h.run({}).reason, 'no_matching_policy')
})

test('kill switch: route limits it to one exact path; expires_at ends it', () => {
  const exp = new Date(T0 + 30_000).toISOString().replace('.000Z', 'Z')
  const h = new Harness(compile(bundle([], { kill_switches: [KS({ route: '/admin', expires_at: exp })] })))
  const acme = { headers: { 'x-tenant': 'acme' } }
  assert.equal(h.run({ ...acme, path: '/admin' }).reason, 'kill_switch')
  assert.equal(h.run({ ...acme, path: '/admin/x' }).reason, 'no_matching_policy')
  assert.equal(h.run({ ...acme, path: '/admin' }, 29.999).reason, 'kill_switch')
  assert.equal(h.run({ ...acme, path: '/admin' }, 30).reason, 'no_matching_policy')
})

test('kill switch: an active kill_switch_override ignores kill switches until it expires; never shadowed', () => {
  const exp = new Date(T0 + 60_000).toISOString().replace('.000Z', 'Z')
  const h = new Harness(
    compile(
      bundle([], {
        kill_switches: [KS({ scope_key: 'ip:address', scope_value: '10.0.0.1' })],
        kill_switch_override: { enabled: true, reason: 'false positive', expires_at: exp },
        global_shadow: { enabled: true, reason: 'rollout', expires_at: '2099-01-01T00:00:00Z' },
      }),
    ),
  )
  assert.equal(h.run({}, 59).reason, 'no_matching_policy')
  assert.equal(h.run({}, 60).reason, 'kill_switch', 'global_shadow does not shadow a kill switch')
})

test('a token_bucket_llm rule is applied with the other rules of its policy and does not trigger the fallback', () => {
  const doc = bundle([
    policy(
      'p',
      [
        { name: 'llm', algorithm: 'token_bucket_llm', algorithm_config: { tokens_per_minute: 6000 } },
        rule('per_ip', ['ip:address'], tb(1, 3)),
      ],
      { fallback_limit: { algorithm: 'token_bucket', algorithm_config: tb(1, 1) } },
    ),
  ])
  const h = new Harness(compile(doc))
  // No body: prompt 0 + default_max_completion 1000 reserved per request; per_ip is the most restrictive.
  const first = h.run()
  assert.equal(first.limit?.remaining, 2)
  assert.deepEqual(
    first.llm?.map((r) => [r.ruleName, r.prompt, r.reserved, r.minute.key]),
    [['llm', 0, 1000, 'tpm:llm:llm:']],
  )
  assert.equal(h.remaining(), 1)
  assert.equal(h.remaining(), 0)
  assert.equal(h.remaining(), 'rejected')
})

test('no bundle → 503 no_bundle_loaded; no matching policy → allow', () => {
  const h = new Harness(compile(bundle([policy('p', [rule('r', [], tb(1, 1))], {}, { pathPrefix: '/api/' })])))
  let none: object | undefined
  h.engine.evaluate(null, view(), T0, false, (d) => (none = d))
  assert.deepEqual({ ...none }, { allowed: false, status: 503, reason: 'no_bundle_loaded', mode: 'enforce', matchedPolicies: [] })
  assert.equal(h.run({ path: '/web' }).reason, 'no_matching_policy')
})

test('RateLimit-Policy window is burst / rate rounded up, without float noise', () => {
  const h = new Harness(compile(bundle([policy('p', [rule('r', ['ip:address'], tb(0.3, 3))])])))
  assert.equal(h.run().limit?.windowS, 10)
})

test('the fallback applies when every selected rule was skipped for a missing key (a garbage token is not a free pass)', () => {
  const h = new Harness(
    compile(
      bundle([
        policy('p', [rule('per_user', ['jwt:sub'], tb(1, 100))], {
          fallback_limit: { algorithm: 'token_bucket', limit_keys: ['ip:address'], algorithm_config: tb(0.001, 2) },
        }),
      ]),
    ),
  )
  const tokenless = { headers: { authorization: 'Bearer garbage' } }
  assert.deepEqual([h.remaining(tokenless), h.remaining(tokenless), h.remaining(tokenless)], [1, 0, 'rejected'])
  assert.equal(h.run({ jwt: { sub: 'alice' } }).limit?.limit, 100, 'a request with a usable key gets its rule, not the fallback')
})

test('an ambiguous limit-key input is refused 400 and charges nothing; a shadow policy only reports it', () => {
  const h = new Harness(
    compile(
      bundle([
        policy('a', [rule('per_ip', ['ip:address'], tb(1, 5))]),
        policy('b', [rule('per_key', ['header:x-api-key'], tb(1, 1))]),
        policy('c', [rule('shadow_key', ['header:x-api-key'], tb(1, 1))], { mode: 'shadow' }),
      ]),
    ),
  )
  const d = h.run({ headers: { 'X-Api-Key': ['junk', 'REAL'] } })
  assert.equal(d.status, 400)
  assert.equal(d.reason, 'ambiguous_request')
  assert.equal(d.policyId, 'b')
  assert.equal(d.ruleName, 'per_key')
  assert.match(d.message ?? '', /x-api-key is repeated with different values/)
  assert.equal(h.remaining({}), 4, 'per_ip was not charged by the refused request')
  assert.deepEqual(
    h.obs.shadow.map((s) => [s.policyId, s.ruleName, s.reason]),
    [['c', 'shadow_key', 'ambiguous_request']],
  )
  // A shadow policy alone never refuses.
  const shadowOnly = new Harness(compile(bundle([policy('c', [rule('k', ['query:t'], tb(1, 1))], { mode: 'shadow' })])))
  assert.equal(shadowOnly.run({ query: 't=a&t=b' }).allowed, true)
  assert.equal(shadowOnly.obs.shadow[0]?.reason, 'ambiguous_request')
})

test('an ambiguous match value or kill-switch scope is refused too, never read as one of its values', () => {
  const matched = new Harness(
    compile(bundle([policy('p', [rule('free', ['ip:address'], tb(1, 1), { match: { 'header:x-plan': 'free' } })])])),
  )
  assert.equal(matched.run({ headers: { 'X-Plan': ['premium', 'free'] } }).status, 400)
  const killed = new Harness(compile(bundle([], { kill_switches: [{ scope_key: 'header:x-user', scope_value: 'bad', reason: 'abuse' }] })))
  assert.equal(killed.run({ headers: { 'X-User': 'bad' } }).reason, 'kill_switch')
  const d = killed.run({ headers: { 'X-User': ['other', 'bad'] } })
  assert.deepEqual([d.status, d.reason], [400, 'ambiguous_request'])
})

test("a store failure: the fail policy's decision, carrying the store's error for the front ends that answer it", async () => {
  // Nothing listens on port 1: the call fails at once.
  const store = new RedisStore({ target: parseRedisUrl('redis://127.0.0.1:1'), timeoutMs: 500 })
  try {
    const b = compile(bundle([policy('p', [rule('r', ['ip:address'], tb(1, 5))])]))
    for (const failPolicy of ['open', 'closed'] as const) {
      const errors: Error[] = []
      const engine = new Engine({
        store,
        failPolicy,
        observer: { descriptorMissing() {}, shadowReject() {}, storeError: (e) => errors.push(e) },
      })
      const d = await new Promise<Decision>((resolve) => engine.evaluate(b, view(), T0, false, resolve))
      assert.deepEqual(
        [d.allowed, d.reason],
        failPolicy === 'open' ? [true, 'store_unavailable_fail_open'] : [false, 'service_unavailable'],
      )
      assert.equal(errors.length, 1)
      assert.equal(d.storeError, errors[0]!.message)
      assert.equal(d.message, undefined, 'nothing of it for the client')
    }
  } finally {
    await store.close()
  }
})
