/**
 * The Rate Limit Service v3 over gRPC, through the real gateway process,
 * configured with envoyproxy/ratelimit's README examples as they are: the
 * statuses its documentation states.
 */
import assert from 'node:assert/strict'
import { copyFileSync, mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { status as Code } from '@grpc/grpc-js'
import { grpcClients, type GrpcClients } from '../helpers/grpc-client.js'
import { metricValue, ROOT, startGateway, type GatewayProcess } from '../helpers/processes.js'

const OK = 1
const OVER_LIMIT = 2
type Entries = Array<[string, string]>
const desc = (entries: Entries, hits?: number): object => ({
  entries: entries.map(([key, value]) => ({ key, value })),
  ...(hits === undefined ? {} : { hits_addend: { value: hits } }),
})

describe('RLS v3 ShouldRateLimit over gRPC', () => {
  let gw: GatewayProcess
  let c: GrpcClients
  let dir: string
  const ask = (domain: string, descriptors: object[], hits_addend?: number) =>
    c.shouldRateLimit({ domain, descriptors, ...(hits_addend ? { hits_addend } : {}) })

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'fv-rls-'))
    copyFileSync(join(ROOT, 'test/fixtures/rls/readme-examples.yaml'), join(dir, 'config.yaml'))
    // A bundle limiting the RLS domain `bundled` per descriptor entry `user`.
    const bundle = join(mkdtempSync(join(tmpdir(), 'fv-rls-bundle-')), 'bundle.json')
    writeFileSync(
      bundle,
      JSON.stringify({
        bundle_version: 1,
        policies: [
          {
            id: 'rls',
            spec: {
              selector: { pathExact: '/bundled' },
              rules: [
                {
                  name: 'per_user',
                  limit_keys: ['descriptor:user'],
                  algorithm: 'token_bucket',
                  algorithm_config: { tokens_per_second: 0.01, burst: 2 },
                },
              ],
            },
          },
        ],
      }),
    )
    gw = await startGateway({
      FAIRVISOR_CONFIG_FILE: bundle,
      FAIRVISOR_MODE: 'decision_service',
      FAIRVISOR_GRPC_PORT: '0',
      FAIRVISOR_RLS_CONFIG: dir,
      FAIRVISOR_RLS_RESPONSE_HEADERS: 'true',
    })
    const line = await gw.waitForLog((l) => typeof l.msg === 'string' && l.msg.startsWith('fairvisor listening'))
    c = grpcClients(line.grpcPort as number)
  })
  after(async () => {
    c?.close()
    await gw?.stop()
  })

  test('mongo_cps: database=users is limited at 500/s; an unknown value has no limit', async () => {
    const r = await ask('mongo_cps', [desc([['database', 'users']]), desc([['database', 'other']])])
    assert.equal(r.overall_code, OK)
    assert.equal(r.statuses.length, 2)
    assert.deepEqual(r.statuses[0].current_limit, { requests_per_unit: 500, unit: 1 })
    assert.equal(r.statuses[0].limit_remaining, 499)
    assert.ok(Number(r.statuses[0].duration_until_reset.seconds) >= 1 && Number(r.statuses[0].duration_until_reset.seconds) <= 1)
    assert.equal(r.statuses[1].code, OK)
    assert.equal(r.statuses[1].current_limit, undefined)
  })

  test('messaging: 5 marketing messages a day to one number, 100 a day to any number', async () => {
    const marketing = desc([
      ['message_type', 'marketing'],
      ['to_number', '2061234567'],
    ])
    const any = desc([['to_number', '2061234567']])
    for (let i = 1; i <= 5; i++) {
      const r = await ask('messaging', [marketing, any])
      assert.equal(r.overall_code, OK, `message ${i}`)
      assert.equal(r.statuses[0].limit_remaining, 5 - i)
      assert.equal(r.statuses[1].limit_remaining, 100 - i)
      assert.deepEqual(r.statuses[0].current_limit, { requests_per_unit: 5, unit: 4 })
    }
    const sixth = await ask('messaging', [marketing, any])
    assert.equal(sixth.overall_code, OVER_LIMIT)
    assert.equal(sixth.statuses[0].code, OVER_LIMIT)
    assert.equal(sixth.statuses[0].limit_remaining, 0)
    // A rejected call charges every descriptor, as envoyproxy/ratelimit (its fixed cache with
    // STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT off): the number's daily count goes to 6.
    assert.equal(sixth.statuses[1].code, OK)
    assert.equal(sixth.statuses[1].limit_remaining, 94)
    // A non-marketing message to the same number is still allowed, on the 100/day limit.
    const plain = await ask('messaging', [any])
    assert.equal(plain.overall_code, OK)
    assert.equal(plain.statuses[0].limit_remaining, 93)
    // The RateLimit-* headers of the descriptor with the fewest requests left.
    const h = Object.fromEntries(sixth.response_headers_to_add.map((x: { key: string; value: string }) => [x.key, x.value]))
    assert.equal(h['RateLimit-Limit'], '5')
    assert.equal(h['RateLimit-Remaining'], '0')
  })

  test('edge_proxy_per_ip: 10/s per address, exact; the blacklisted address is always over', async () => {
    const black = await ask('edge_proxy_per_ip', [desc([['remote_address', '50.0.0.5']])])
    assert.equal(black.overall_code, OVER_LIMIT)
    assert.deepEqual(black.statuses[0].current_limit, { requests_per_unit: 0, unit: 1 })
    // One call, two descriptors on one counter: 10 hits fit, the 11th does not (one store call, one window).
    const r = await ask('edge_proxy_per_ip', [desc([['remote_address', '10.0.0.1']], 10), desc([['remote_address', '10.0.0.1']], 1)])
    assert.equal(r.statuses[0].code, OK)
    assert.equal(r.statuses[0].limit_remaining, 0)
    assert.equal(r.statuses[1].code, OVER_LIMIT)
    assert.equal(r.overall_code, OVER_LIMIT)
  })

  test('hits_addend of the request counts for every descriptor', async () => {
    const r = await ask('internal', [desc([['azure', 'x']])], 40)
    assert.equal(r.statuses[0].limit_remaining, 60)
    const over = await ask('internal', [desc([['azure', 'x']])], 61)
    assert.equal(over.overall_code, OVER_LIMIT)
  })

  test('internal: ldap is unlimited', async () => {
    const r = await ask('internal', [desc([['ldap', 'anything']], 1_000_000)])
    assert.equal(r.overall_code, OK)
    assert.equal(r.statuses[0].limit_remaining, 0xffffffff)
  })

  test('example6: a shadow_mode limit counts but never answers OVER_LIMIT', async () => {
    const r = await ask('example6', [desc([['remote_address', '10.0.0.2']], 11)])
    assert.equal(r.overall_code, OK)
    assert.equal(r.statuses[0].code, OK)
  })

  test('example7: a limit with replaces takes the place of the named one', async () => {
    const both = [desc([['key1', 'value1']]), desc([['key2', 'value2']])]
    for (let i = 0; i < 5; i++) assert.equal((await ask('example7', both)).overall_code, OK, `call ${i}`)
    const r = await ask('example7', both)
    assert.equal(r.statuses[0].current_limit, undefined)
    assert.equal(r.statuses[1].limit_remaining, 4)
    // Alone, key1 is limited by its own 3/hour.
    for (let i = 0; i < 3; i++) assert.equal((await ask('example7', [desc([['key1', 'value1']])])).overall_code, OK)
    assert.equal((await ask('example7', [desc([['key1', 'value1']])])).overall_code, OVER_LIMIT)
  })

  test('bundles: descriptor:<key> limits RLS calls (a domain is the path /<domain>)', async () => {
    for (let i = 0; i < 2; i++) assert.equal((await ask('bundled', [desc([['user', 'ann']])])).overall_code, OK)
    const over = await ask('bundled', [desc([['user', 'ann']])])
    assert.equal(over.overall_code, OVER_LIMIT)
    assert.equal(over.statuses[0].limit_remaining, 0)
    assert.equal((await ask('bundled', [desc([['user', 'ben']])])).statuses[0].limit_remaining, 1)
    // Other domains are not matched by the policy's selector.
    assert.equal((await ask('internal', [desc([['ldap', 'x']])])).overall_code, OK)
  })

  test('an unknown domain allows; malformed requests are INVALID_ARGUMENT', async () => {
    assert.equal((await ask('nope', [desc([['a', 'b']])])).overall_code, OK)
    await assert.rejects(ask('', [desc([['a', 'b']])]), (e: { code: number }) => e.code === Code.INVALID_ARGUMENT)
    await assert.rejects(ask('messaging', []), (e: { code: number }) => e.code === Code.INVALID_ARGUMENT)
    // A descriptor without entries matches no limit (as envoyproxy/ratelimit): OK, not an error.
    assert.equal((await ask('messaging', [{ entries: [] }])).overall_code, OK)
    await assert.rejects(
      c.raw('/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit', Buffer.from([0x12, 0x05, 0x0a])),
      (e: { code: number }) => e.code === Code.INVALID_ARGUMENT,
    )
    assert.ok(((await metricValue(gw, 'fairvisor_rls_decisions_total', 'domain="_unknown"')) ?? 0) >= 1)
    assert.ok(((await metricValue(gw, 'fairvisor_rls_decisions_total', 'domain="messaging",code="over_limit"')) ?? 0) >= 1)
  })

  test('hot reload: a new configuration applies; a broken one (a misspelled key) is refused and the last good stays', async () => {
    writeFileSync(join(dir, 'config.yaml'), 'domain: fresh\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 1}\n')
    await gw.waitForLog((l) => l.msg === 'rls config loaded' && Array.isArray(l.domains) && (l.domains as string[]).includes('fresh'))
    assert.equal((await ask('fresh', [desc([['k', 'v']])])).overall_code, OK)
    assert.equal((await ask('fresh', [desc([['k', 'v']])])).overall_code, OVER_LIMIT)
    writeFileSync(join(dir, 'config.yaml'), 'domain: fresh\ndescriptors:\n  - key: k\n    ratelimit: {unit: hour, requests_per_unit: 1}\n')
    const refused = await gw.waitForLog((l) => String(l.msg).startsWith('rls config rejected'))
    assert.match(String((refused.err as { message: string }).message), /config error, unknown key 'ratelimit'/)
    assert.equal((await ask('fresh', [desc([['k', 'v']])])).overall_code, OVER_LIMIT)
  })
})
