/**
 * A ShouldRateLimit call is decided by the engine like any request: one
 * decision per call, recorded with its reason and the policy `rls:<domain>`;
 * a shadow_mode limit's would-reject reported as a shadow policy's; a store
 * failure reported to the observer (store errors, the log) and answered an
 * error as envoyproxy/ratelimit answers it (UNKNOWN), or by the engine's fail
 * policy with FAIRVISOR_RLS_STORE_FAILURE=policy. The real engine, the
 * in-process store, and a Redis store whose server is not there.
 */
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { after, describe, test } from 'node:test'
import type { CompiledBundle } from '../../../src/bundle/compile.js'
import { createDecider, createLimitDecider } from '../../../src/decision/decide.js'
import type { RateLimitResponse } from '../../../src/decision/rls-answer.js'
import { toStruct } from '../../../src/decision/rls-metadata.js'
import type { Decision, ShadowReject } from '../../../src/engine/decision.js'
import { InvalidGrpcRequest } from '../../../src/errors.js'
import { Engine } from '../../../src/engine/evaluate.js'
import { parseRlsYaml } from '../../../src/grpc/rls-config.js'
import { createShouldRateLimit, type RateLimitRequest, type RlsOptions } from '../../../src/grpc/rls-service.js'
import { GrpcFailure } from '../../../src/grpc/wire.js'
import { NetworkData } from '../../../src/request/network-data.js'
import { MemoryStore } from '../../../src/store/memory/store.js'
import { RedisStore } from '../../../src/store/redis/store.js'
import { parseRedisUrl } from '../../../src/store/redis/url.js'
import type { FailPolicy, Store } from '../../../src/store/store.js'
import { bundle, compile, policy, rule, tb } from '../../helpers/engine-harness.js'
import { ROOT } from '../../helpers/processes.js'

const OK = 1
const OVER_LIMIT = 2
const config = parseRlsYaml(readFileSync(join(ROOT, 'test/fixtures/rls/readme-examples.yaml'), 'utf8'), 'readme-examples.yaml')

/** `o.bundle`: a bundle in force, deciding each descriptor too (grpc/rls-bundle.ts); the rest, options of the service. */
function gateway(
  store: Store,
  failPolicy: FailPolicy = 'open',
  chargeRejected = true,
  rls = config,
  o: Partial<RlsOptions> & { bundle?: CompiledBundle } = {},
) {
  const decisions: Decision[] = []
  const answers: Array<[string | undefined, number, boolean]> = []
  const shadow: ShadowReject[] = []
  const storeErrors: Error[] = []
  const engine = new Engine({
    store,
    failPolicy,
    observer: { descriptorMissing() {}, shadowReject: (r) => shadow.push(r), storeError: (e) => storeErrors.push(e) },
  })
  const clock = () => Date.UTC(2026, 0, 1)
  const decided = (d: Decision) => decisions.push(d)
  const net = new NetworkData({ asnMapFile: undefined, geoipCountryFile: undefined, geoipAsnFile: undefined, torExitListFile: undefined })
  const { bundle: compiled, ...options } = o
  const shouldRateLimit = createShouldRateLimit({
    config: () => rls,
    decideLimits: createLimitDecider({ engine, clock, decided }),
    responseHeaders: false,
    chargeRejected,
    decide:
      compiled === undefined
        ? undefined
        : createDecider({ engine, bundle: () => compiled, jwt: undefined, trusted: undefined, net, clock, decided }),
    bundleLoaded: () => compiled !== undefined,
    answered: (domain, overall, failed) => answers.push([domain, overall, failed]),
    ...options,
  })
  const ask = (req: RateLimitRequest) =>
    new Promise<RateLimitResponse>((resolve, reject) => shouldRateLimit(req, (err, res) => (err ? reject(err) : resolve(res!))))
  return { ask, decisions, shadow, storeErrors, answers }
}

const call = (domain: string, key: string, value: string, hits?: number): RateLimitRequest => ({
  domain,
  descriptors: [{ entries: [{ key, value }], ...(hits === undefined ? {} : { hits_addend: { value: hits } }) }],
})

describe('ShouldRateLimit through the engine', () => {
  test('each call is one decision: its policy rls:<domain>, rls_over_limit on OVER_LIMIT, no match for an unknown domain', async () => {
    const g = gateway(new MemoryStore({ maxBytes: 1 << 20 }))
    assert.equal((await g.ask(call('internal', 'azure', 'a', 100))).overall_code, OK)
    assert.equal((await g.ask(call('internal', 'azure', 'a'))).overall_code, OVER_LIMIT)
    assert.equal((await g.ask(call('nowhere', 'k', 'v'))).overall_code, OK)
    assert.deepEqual(
      g.decisions.map((d) => [d.allowed, d.reason, d.policyId, d.matchedPolicies]),
      [
        [true, 'all_rules_passed', 'rls:internal', ['rls:internal']],
        [false, 'rls_over_limit', 'rls:internal', ['rls:internal']],
        [true, 'no_matching_policy', undefined, []],
      ],
    )
    // The counter key, as envoyproxy/ratelimit's configuration names it.
    assert.equal(g.decisions[1]!.key, 'rls:internal_azure_a')
    assert.deepEqual(g.decisions[0]!.limit, { policyId: 'rls:internal', limit: 100, remaining: 0, resetS: 60, windowS: 60 })
  })

  test('a descriptor without entries matches no limit: OK with none, beside a limited one (as envoyproxy/ratelimit)', async () => {
    const g = gateway(new MemoryStore({ maxBytes: 1 << 20 }))
    const alone = await g.ask({ domain: 'internal', descriptors: [{ entries: [] }] })
    assert.equal(alone.overall_code, OK)
    assert.deepEqual(
      alone.statuses.map((s) => s.code),
      [OK],
    )
    const req: RateLimitRequest = {
      domain: 'internal',
      descriptors: [{ entries: [] }, ...call('internal', 'azure', 'a', 100).descriptors!],
    }
    const first = (await g.ask(req)) as { overall_code: number; statuses: Array<{ code: number; current_limit?: unknown }> }
    assert.equal(first.overall_code, OK)
    assert.equal(first.statuses[0]!.current_limit ?? null, null)
    assert.equal(first.statuses[1]!.code, OK)
    // The limited descriptor still counts: its next hit is over, the empty one stays OK.
    const second = await g.ask(req)
    assert.equal(second.overall_code, OVER_LIMIT)
    assert.deepEqual(
      second.statuses.map((s) => s.code),
      [OK, OVER_LIMIT],
    )
  })

  test('a shadow_mode limit over its count answers OK and is reported as a shadow would-reject', async () => {
    const g = gateway(new MemoryStore({ maxBytes: 1 << 20 }))
    const r = await g.ask(call('example6', 'remote_address', '10.0.0.2', 11))
    assert.equal(r.overall_code, OK)
    assert.deepEqual(
      g.shadow.map((s) => [s.policyId, s.reason, s.key]),
      [['rls:example6', 'rls_over_limit', 'rls:example6_remote_address_10.0.0.2']],
    )
    assert.equal(g.decisions[0]!.mode, 'shadow')
  })

  test('a descriptor hits_addend of 0 only checks: an empty wrapper (as Envoy encodes 0) and an explicit 0 charge nothing', async () => {
    // As envoyproxy/ratelimit's GetHitsAddends: a present per-descriptor hits_addend is used as it is, 0 included.
    const g = gateway(new MemoryStore({ maxBytes: 1 << 20 }))
    const check = (wrapper: object): RateLimitRequest => ({
      domain: 'example7',
      descriptors: [{ entries: [{ key: 'key1', value: 'value1' }], hits_addend: wrapper }],
      hits_addend: 2, // the request's count, not used by a descriptor that has its own
    })
    for (let i = 0; i < 5; i++) {
      assert.equal((await g.ask(check({}))).overall_code, OK, `check ${i}`)
      assert.equal((await g.ask(check({ value: 0 }))).overall_code, OK, `check ${i}`)
    }
    // The limit (3 an hour) is untouched: three charged calls pass, the fourth is over.
    for (let i = 0; i < 3; i++) assert.equal((await g.ask(call('example7', 'key1', 'value1', 1))).overall_code, OK, `call ${i}`)
    assert.equal((await g.ask(call('example7', 'key1', 'value1', 1))).overall_code, OVER_LIMIT)
  })

  test('a call over the limit by its cost reports 0 remaining: a cost of 3 at 98/100 (and a shadow_mode one over)', async () => {
    const g = gateway(new MemoryStore({ maxBytes: 1 << 20 }))
    assert.equal((await g.ask(call('internal', 'azure', 'b', 98))).statuses[0]!.limit_remaining, 2)
    assert.deepEqual((await g.ask(call('internal', 'azure', 'b', 3))).statuses[0], {
      code: OVER_LIMIT,
      limit_remaining: 0,
      current_limit: { requests_per_unit: 100, unit: 2 },
      duration_until_reset: { seconds: 60 },
    })
    assert.deepEqual((await g.ask(call('example6', 'remote_address', '10.0.0.3', 11))).statuses[0]!.limit_remaining, 0)
  })

  describe('a rejected call', () => {
    // messaging: (message_type marketing, to_number) 5 a day, (to_number) 100 a day.
    const marketing = {
      entries: [
        { key: 'message_type', value: 'marketing' },
        { key: 'to_number', value: 'n' },
      ],
    }
    const plain = { entries: [{ key: 'to_number', value: 'n' }] }
    const remaining = async (g: ReturnType<typeof gateway>, descriptors: object[]) =>
      (await g.ask({ domain: 'messaging', descriptors })).statuses.map((s) => [s.code, s.limit_remaining])
    for (const [order, descriptors] of [
      ['over one first', [marketing, plain]],
      ['over one last', [plain, marketing]],
    ] as const) {
      test(`${order}: every descriptor is charged and reports its count with its hits (upstream's default)`, async () => {
        // As envoyproxy/ratelimit's fixed cache with STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT off: INCRBY on every key.
        const g = gateway(new MemoryStore({ maxBytes: 1 << 20 }))
        for (let i = 0; i < 5; i++) await g.ask({ domain: 'messaging', descriptors: [marketing, plain] })
        const over = await remaining(g, [...descriptors])
        assert.deepEqual(
          over,
          descriptors[0] === marketing
            ? [
                [OVER_LIMIT, 0],
                [OK, 94],
              ]
            : [
                [OK, 94],
                [OVER_LIMIT, 0],
              ],
        )
        assert.deepEqual(await remaining(g, [plain]), [[OK, 93]])
      })
      test(`${order}, STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT: only the one going over is charged; the others report their count before`, async () => {
        // As upstream's TestOverLimitWithStopCacheKeyIncrementWhenOverlimitConfig: the key not over reports limit - count.
        const g = gateway(new MemoryStore({ maxBytes: 1 << 20 }), 'open', false)
        for (let i = 0; i < 5; i++) await g.ask({ domain: 'messaging', descriptors: [marketing, plain] })
        const over = await remaining(g, [...descriptors])
        assert.deepEqual(
          over,
          descriptors[0] === marketing
            ? [
                [OVER_LIMIT, 0],
                [OK, 95],
              ]
            : [
                [OK, 95],
                [OVER_LIMIT, 0],
              ],
        )
        assert.deepEqual(await remaining(g, [plain]), [[OK, 94]])
        // The marketing count went to 6 of 5: a check that charges nothing finds it over.
        assert.deepEqual(await remaining(g, [{ ...marketing, hits_addend: { value: 0 } }]), [[OVER_LIMIT, 0]])
      })
    }

    test("Envoy's token quota: checks with hits_addend 0, charges of 1 after; the check after the charge that went over is rejected", async () => {
      // As upstream's integration script token-quota.sh (a limit of 2 rejects the 4th request); here 3 an hour, the 5th.
      const g = gateway(new MemoryStore({ maxBytes: 1 << 20 }))
      const at = (hits: object) => ({
        domain: 'example7',
        descriptors: [{ entries: [{ key: 'key1', value: 'value1' }], hits_addend: hits }],
      })
      const codes: number[] = []
      for (let i = 0; i < 5; i++) {
        codes.push((await g.ask(at({}))).overall_code)
        await g.ask(at({ value: 1 }))
      }
      assert.deepEqual(codes, [OK, OK, OK, OK, OVER_LIMIT])
    })
  })

  test('quota_mode from the YAML: the call is OVER_LIMIT only once every quota descriptor is over', async () => {
    const yaml = [
      'domain: quota',
      'descriptors:',
      '  - key: small',
      '    quota_mode: true',
      '    rate_limit: {unit: hour, requests_per_unit: 1}',
      '  - key: large',
      '    quota_mode: true',
      '    rate_limit: {unit: hour, requests_per_unit: 2}',
    ].join('\n')
    const g = gateway(new MemoryStore({ maxBytes: 1 << 20 }), 'open', true, parseRlsYaml(yaml, 'quota.yaml'))
    const both = {
      domain: 'quota',
      descriptors: [{ entries: [{ key: 'small', value: 'a' }] }, { entries: [{ key: 'large', value: 'a' }] }],
    }
    const answers = []
    for (let i = 0; i < 3; i++) {
      const r = await g.ask(both)
      answers.push([r.overall_code, ...r.statuses.map((s) => s.code)])
    }
    assert.deepEqual(answers, [
      [OK, OK, OK],
      [OK, OVER_LIMIT, OK], // the small quota is spent, the large one is not
      [OVER_LIMIT, OVER_LIMIT, OVER_LIMIT],
    ])
  })

  describe('the store down', () => {
    const stores: Store[] = []
    after(() => Promise.all(stores.map((s) => s.close())))
    // Nothing listens on port 1: every call fails at once.
    const down = (): Store => {
      const store = new RedisStore({ target: parseRedisUrl('redis://127.0.0.1:1'), timeoutMs: 500 })
      stores.push(store)
      return store
    }
    /** The call's error: it must be a gRPC failure, not an answer. */
    const refusal = (p: Promise<unknown>): Promise<GrpcFailure> =>
      p.then(
        (r) => assert.fail(`answered ${JSON.stringify(r)}`),
        (err: unknown) => {
          assert.ok(err instanceof GrpcFailure, `a gRPC failure, not ${String(err)}`)
          return err
        },
      )
    const UNKNOWN = 2 // the gRPC status envoyproxy/ratelimit's Go server answers a Redis error with

    for (const policy of ['open', 'closed'] as const) {
      test(`fail ${policy}, FAIRVISOR_RLS_STORE_FAILURE=error (the default): answered UNKNOWN with the store's error (as envoyproxy/ratelimit), counted as such`, async () => {
        const g = gateway(down(), policy, true, config, { storeFailure: 'error' })
        const err = await refusal(g.ask(call('messaging', 'to_number', '2061234567')))
        assert.equal(err.code, UNKNOWN)
        assert.equal(err.details, `rate limit store unavailable: ${g.decisions[0]!.storeError}`)
        assert.ok(g.decisions[0]!.storeError!.length > 0)
        assert.equal(g.storeErrors.length, 1, 'the store error still reaches the observer (log, fairvisor_store_errors_total)')
        assert.deepEqual(g.answers, [['messaging', 0, true]])
      })

      test(`fail ${policy}, FAIRVISOR_RLS_STORE_FAILURE=policy: the store error reaches the observer; the decision and the answer are the fail policy's`, async () => {
        const g = gateway(down(), policy, true, config, { storeFailure: 'policy' })
        const r = await g.ask(call('messaging', 'to_number', '2061234567'))
        assert.equal(r.overall_code, policy === 'open' ? OK : OVER_LIMIT)
        assert.equal(g.storeErrors.length, 1)
        assert.equal(g.decisions[0]!.reason, policy === 'open' ? 'store_unavailable_fail_open' : 'service_unavailable')
        assert.deepEqual(g.answers, [['messaging', r.overall_code, true]])
      })
    }

    const edge = compile(
      bundle([policy('edge', [rule('per_ip', ['descriptor:remote_address'], tb(1, 10))], {}, { pathExact: '/edge_bundle_only' })]),
    )
    // A domain the configuration does not have: only the bundle limits its calls.
    const edgeCall: RateLimitRequest = {
      domain: 'edge_bundle_only',
      descriptors: [{ entries: [{ key: 'remote_address', value: '10.0.0.1' }] }],
    }

    test('a bundle deciding the descriptors (no configured limit) follows the same rule: UNKNOWN by default, the fail policy with policy', async () => {
      const g = gateway(down(), 'closed', true, config, { storeFailure: 'error', bundle: edge })
      const err = await refusal(g.ask(edgeCall))
      assert.equal(err.code, UNKNOWN)
      assert.match(err.details, /^rate limit store unavailable: \S/)
      assert.deepEqual(g.answers, [[undefined, 0, true]])
      assert.deepEqual(
        g.decisions.map((d) => d.reason),
        ['no_matching_policy', 'service_unavailable'],
      )
      const p = gateway(down(), 'closed', true, config, { storeFailure: 'policy', bundle: edge })
      assert.equal((await p.ask(edgeCall)).overall_code, OVER_LIMIT)
      const open = gateway(down(), 'open', true, config, { storeFailure: 'policy', bundle: edge })
      assert.equal((await open.ask(edgeCall)).overall_code, OK)
    })

    test('a call that needs no store call is answered as usual with the store down', async () => {
      const g = gateway(down(), 'closed', true, config, { storeFailure: 'error' })
      const r = await g.ask(call('nowhere', 'k', 'v'))
      assert.equal(r.overall_code, OK)
      assert.equal(g.storeErrors.length, 0)
    })
  })
})

describe("envoyproxy/ratelimit's request limit override and global switches", () => {
  const mem = () => new MemoryStore({ maxBytes: 1 << 20 })
  const entries = (key: string, value: string) => [{ key, value }]
  const codes = (r: RateLimitResponse) => [r.overall_code, ...r.statuses.map((s) => s.code)]

  describe('a descriptor limit override', () => {
    test('replaces the configured limit: its rate and unit counted, reported as current_limit without a name', async () => {
      const g = gateway(mem())
      // example7's key1_value1 is `global`, 3 an hour.
      const req = { domain: 'example7', descriptors: [{ entries: entries('key1', 'value1'), limit: { requests_per_unit: 1, unit: 2 } }] }
      const first = await g.ask(req)
      assert.deepEqual(first.statuses[0], {
        code: OK,
        current_limit: { requests_per_unit: 1, unit: 2 },
        limit_remaining: 0,
        duration_until_reset: { seconds: 60 },
      })
      assert.deepEqual(codes(await g.ask(req)), [OVER_LIMIT, OVER_LIMIT])
    })

    test('applies to entries the configuration has no limit for (no entries at all too), in a domain it has; none in another', async () => {
      const g = gateway(mem())
      const limit = { requests_per_unit: 2, unit: 4 }
      const req = { domain: 'messaging', descriptors: [{ entries: entries('nope', 'x'), limit }, { limit }] }
      assert.deepEqual(codes(await g.ask(req)), [OK, OK, OK])
      assert.deepEqual(codes(await g.ask(req)), [OK, OK, OK])
      assert.deepEqual(codes(await g.ask(req)), [OVER_LIMIT, OVER_LIMIT, OVER_LIMIT])
      const elsewhere = await g.ask({
        domain: 'nowhere',
        descriptors: [{ entries: entries('nope', 'x'), limit: { requests_per_unit: 0, unit: 1 } }],
      })
      assert.deepEqual(elsewhere.statuses, [{ code: OK, limit_remaining: 0 }])
    })

    test("counts on the configured limit's counter when it has the same unit, apart under another unit", async () => {
      const g = gateway(mem())
      // azure: 100 a minute. 98 charged without an override.
      await g.ask(call('internal', 'azure', 'z', 98))
      const same = await g.ask({
        domain: 'internal',
        descriptors: [{ entries: entries('azure', 'z'), limit: { requests_per_unit: 100, unit: 2 } }],
      })
      assert.equal(same.statuses[0]!.limit_remaining, 1)
      const other = await g.ask({
        domain: 'internal',
        descriptors: [{ entries: entries('azure', 'z'), limit: { requests_per_unit: 100, unit: 3 } }],
      })
      assert.equal(other.statuses[0]!.limit_remaining, 99)
      assert.equal((await g.ask(call('internal', 'azure', 'z'))).statuses[0]!.limit_remaining, 0)
    })

    test('of an unknown unit: INVALID_ARGUMENT, nothing charged', async () => {
      const g = gateway(mem())
      for (const unit of [0, 8])
        await assert.rejects(
          g.ask({ domain: 'internal', descriptors: [{ entries: entries('azure', 'u'), limit: { requests_per_unit: 1, unit } }] }),
          (e: Error) => e instanceof InvalidGrpcRequest && e.message === `descriptor 0 has a limit override of unknown unit ${unit}`,
        )
      assert.equal(g.decisions.length, 0)
    })
  })

  describe('SHADOW_MODE', () => {
    test("the call OK while its statuses say OVER_LIMIT, headers included (upstream's TestServiceGlobalShadowMode)", async () => {
      const g = gateway(mem(), 'open', true, config, { shadowMode: true, responseHeaders: true })
      const req = {
        domain: 'example7',
        descriptors: [{ entries: entries('key1', 'value1'), hits_addend: { value: 4 } }, { entries: entries('nope', 'x') }],
      }
      const r = await g.ask(req)
      assert.deepEqual(codes(r), [OK, OVER_LIMIT, OK])
      assert.equal(r.statuses[0]!.limit_remaining, 0)
      assert.deepEqual(
        r.response_headers_to_add?.map((h) => [h.key, h.value]),
        [
          ['RateLimit-Limit', '3'],
          ['RateLimit-Remaining', '0'],
          ['RateLimit-Reset', '3600'],
        ],
      )
      // Counted as every call is: the would-be reject is the engine's shadow one.
      assert.deepEqual(
        g.shadow.map((s) => [s.policyId, s.key]),
        [['rls:example7', 'rls:example7_key1_value1']],
      )
      assert.deepEqual([g.decisions[0]!.allowed, g.decisions[0]!.mode], [true, 'shadow'])
      assert.deepEqual(codes(await g.ask(call('example7', 'key1', 'value1', 1))), [OK, OVER_LIMIT])
    })

    test('with quota_mode descriptors all over: OK (TestServiceQuotaModeWithShadowMode); a store failure still answers the fail policy', async () => {
      const g = gateway(mem(), 'open', true, config, { shadowMode: true, quotaMode: true })
      const over = { domain: 'internal', descriptors: [{ entries: entries('azure', 'q'), hits_addend: { value: 101 } }] }
      assert.deepEqual(codes(await g.ask(over)), [OK, OVER_LIMIT])
      const store = new RedisStore({ target: parseRedisUrl('redis://127.0.0.1:1'), timeoutMs: 500 })
      try {
        const down = gateway(store, 'closed', true, config, { shadowMode: true })
        assert.deepEqual(codes(await down.ask(call('internal', 'azure', 'q'))), [OVER_LIMIT, OVER_LIMIT])
      } finally {
        await store.close()
      }
    })
  })

  describe('QUOTA_MODE', () => {
    test("every descriptor a quota one: OVER_LIMIT only when all are over (upstream's TestServiceGlobalQuotaMode)", async () => {
      const g = gateway(mem(), 'open', true, config, { quotaMode: true })
      // messaging: (to_number) 100 a day; internal: azure 100 a minute.
      const two = (a: number, b: number) => ({
        domain: 'messaging',
        descriptors: [
          { entries: entries('to_number', 'a'), hits_addend: { value: a } },
          { entries: entries('to_number', 'b'), hits_addend: { value: b } },
        ],
      })
      assert.deepEqual(codes(await g.ask(two(101, 1))), [OK, OVER_LIMIT, OK])
      assert.deepEqual(codes(await g.ask(two(1, 100))), [OVER_LIMIT, OVER_LIMIT, OVER_LIMIT])
    })

    test('a descriptor without a limit is a quota one that passes; an unlimited one is not a quota one', async () => {
      const g = gateway(mem(), 'open', true, config, { quotaMode: true })
      const over = { entries: entries('azure', 'o'), hits_addend: { value: 101 } }
      assert.deepEqual(codes(await g.ask({ domain: 'internal', descriptors: [over, { entries: entries('nope', 'x') }] })), [
        OK,
        OVER_LIMIT,
        OK,
      ])
      assert.deepEqual(codes(await g.ask({ domain: 'internal', descriptors: [over, { entries: entries('ldap', 'x') }] })), [
        OVER_LIMIT,
        OVER_LIMIT,
        OK,
      ])
      // The store down, failing closed: OVER_LIMIT, a descriptor without a limit beside or not.
      const store = new RedisStore({ target: parseRedisUrl('redis://127.0.0.1:1'), timeoutMs: 500 })
      try {
        const down = gateway(store, 'closed', true, config, { quotaMode: true })
        const r = await down.ask({
          domain: 'internal',
          descriptors: [{ entries: entries('azure', 'd') }, { entries: entries('nope', 'x') }],
        })
        assert.deepEqual(codes(r), [OVER_LIMIT, OVER_LIMIT, OK])
      } finally {
        await store.close()
      }
      // Not set: an over descriptor makes the call OVER_LIMIT whatever the others say.
      const plain = gateway(mem())
      assert.deepEqual(codes(await plain.ask({ domain: 'internal', descriptors: [over, { entries: entries('nope', 'x') }] })), [
        OVER_LIMIT,
        OVER_LIMIT,
        OK,
      ])
    })
  })

  describe('RESPONSE_DYNAMIC_METADATA', () => {
    const yaml = [
      'domain: quota-domain',
      'descriptors:',
      '  - key: regular',
      '    rate_limit: {unit: minute, requests_per_unit: 10}',
      '    metadata: {name: service_1, svc: {tier: a}}',
      '  - key: quota',
      '    rate_limit: {unit: minute, requests_per_unit: 5}',
      '    quota_mode: true',
      '    metadata: {name: service_2, some_other_name: service_2, svc: {zone: z}}',
      '  - key: plain',
      '    rate_limit: {unit: minute, requests_per_unit: 5}',
    ].join('\n')
    const rls = parseRlsYaml(yaml, 'quota.yaml')
    const both = (regular: number, quota: number): RateLimitRequest => ({
      domain: 'quota-domain',
      descriptors: [
        { entries: entries('regular', 'limit'), hits_addend: { value: regular } },
        { entries: entries('quota', 'limit'), hits_addend: { value: quota } },
      ],
    })
    const metadataOf = (r: RateLimitResponse) => r.dynamic_metadata?.fields.metadata

    test('the metadata of every passed descriptor, the first value of a field kept (TestMetadataReturnedForAllPassedDescriptors)', async () => {
      const g = gateway(mem(), 'open', true, rls, { quotaMode: true, dynamicMetadata: true })
      const r = await g.ask(both(1, 1))
      assert.deepEqual(
        r.dynamic_metadata,
        toStruct({
          domain: 'quota-domain',
          descriptors: [
            { entries: ['regular=limit'], hitsAddend: 1 },
            { entries: ['quota=limit'], hitsAddend: 1 },
          ],
          metadata: { name: 'service_1', svc: { tier: 'a', zone: 'z' }, some_other_name: 'service_2' },
        }),
      )
    })

    test('only the passed ones: a quota descriptor over is left out (TestMetadataReturnedForPassedDescriptors); none passed, none', async () => {
      const g = gateway(mem(), 'open', true, rls, { quotaMode: true, dynamicMetadata: true })
      const r = await g.ask(both(1, 6))
      assert.deepEqual(codes(r), [OK, OK, OVER_LIMIT])
      assert.deepEqual(metadataOf(r), toStruct({ x: { name: 'service_1', svc: { tier: 'a' } } }).fields.x)
      const none = await g.ask(both(10, 1))
      assert.deepEqual(codes(none), [OVER_LIMIT, OVER_LIMIT, OVER_LIMIT])
      assert.equal(metadataOf(none), undefined)
      assert.deepEqual(Object.keys(none.dynamic_metadata!.fields), ['domain', 'descriptors'])
    })

    test("an override's limit has none and is told in the descriptor; SHADOW_MODE's over descriptors did not pass", async () => {
      const g = gateway(mem(), 'open', true, rls, { dynamicMetadata: true, shadowMode: true })
      const req: RateLimitRequest = {
        domain: 'quota-domain',
        descriptors: [{ entries: entries('regular', 'o'), limit: { requests_per_unit: 3, unit: 3 } }],
        hits_addend: 2,
      }
      assert.deepEqual(
        (await g.ask(req)).dynamic_metadata,
        toStruct({
          domain: 'quota-domain',
          descriptors: [{ entries: ['regular=o'], limit: 'requests_per_unit:3 unit:HOUR' }],
          hitsAddend: 2,
        }),
      )
      const over = await g.ask(both(11, 1))
      assert.deepEqual(codes(over), [OK, OVER_LIMIT, OK])
      assert.deepEqual(metadataOf(over), toStruct({ x: { name: 'service_2', some_other_name: 'service_2', svc: { zone: 'z' } } }).fields.x)
    })

    test('off (the default): no dynamic_metadata', async () => {
      const g = gateway(mem(), 'open', true, rls)
      assert.equal((await g.ask(both(1, 1))).dynamic_metadata, undefined)
    })
  })
})
