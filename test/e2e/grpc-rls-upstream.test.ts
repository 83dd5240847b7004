/**
 * envoyproxy/ratelimit's own wildcard.yaml and share_threshold.yaml, one
 * domain over two files merged by its MERGE_DOMAIN_CONFIG, through the real
 * gateway: wildcards anywhere in a value match, each matched value counting
 * alone unless share_threshold makes them share one counter.
 */
import assert from 'node:assert/strict'
import { copyFileSync, mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { status as Code } from '@grpc/grpc-js'
import { grpcClients, type GrpcClients } from '../helpers/grpc-client.js'
import { ROOT, startGateway, type GatewayProcess } from '../helpers/processes.js'

const OK = 1
const OVER_LIMIT = 2
interface Answer {
  overall_code: number
  statuses: Array<{ code: number; current_limit?: { requests_per_unit: number } | null; limit_remaining: number }>
}

describe('envoyproxy/ratelimit wildcards and share_threshold over gRPC', () => {
  let gw: GatewayProcess
  let c: GrpcClients
  const ask = async (key: string, value: string, hits = 1): Promise<Answer> =>
    (await c.shouldRateLimit({
      domain: 'test-domain',
      descriptors: [{ entries: [{ key, value }], hits_addend: { value: hits } }],
    })) as Answer

  before(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fv-rls-upstream-'))
    for (const f of ['wildcard.yaml', 'share_threshold.yaml']) copyFileSync(join(ROOT, 'test/fixtures/rls/upstream', f), join(dir, f))
    gw = await startGateway({
      FAIRVISOR_MODE: 'decision_service',
      FAIRVISOR_GRPC_PORT: '0',
      FAIRVISOR_RLS_CONFIG: dir,
      MERGE_DOMAIN_CONFIG: 'true',
      // Its response-header switch and names, under its own variable names.
      LIMIT_RESPONSE_HEADERS_ENABLED: 'true',
      LIMIT_LIMIT_HEADER: 'X-RL-Limit',
      LIMIT_REMAINING_HEADER: 'X-RL-Remaining',
    })
    const line = await gw.waitForLog((l) => typeof l.msg === 'string' && l.msg.startsWith('fairvisor listening'))
    c = grpcClients(line.grpcPort as number)
    // The limits are per minute, windows on minute boundaries: start well inside one so a test's calls share it.
    const into = Date.now() % 60_000
    if (into > 50_000) await new Promise((r) => setTimeout(r, 60_500 - into))
  })
  after(async () => {
    c?.close()
    await gw?.stop()
  })

  test('LIMIT_RESPONSE_HEADERS_ENABLED adds the headers, under the LIMIT_*_HEADER names (RateLimit-Reset by default)', async () => {
    const r = (await c.shouldRateLimit({
      domain: 'test-domain',
      descriptors: [{ entries: [{ key: 'midWild', value: 'bar-headers-b' }], hits_addend: { value: 1 } }],
    })) as Answer & { response_headers_to_add?: Array<{ key: string; value: string }> }
    assert.equal(r.overall_code, OK)
    assert.deepEqual(
      (r.response_headers_to_add ?? []).map((h) => h.key),
      ['X-RL-Limit', 'X-RL-Remaining', 'RateLimit-Reset'],
    )
    assert.equal(r.response_headers_to_add?.[0]?.value, '20')
  })

  test('a middle wildcard and several wildcards match; each matched value counts alone without share_threshold', async () => {
    const full = await ask('midWild', 'barab', 20)
    assert.equal(full.overall_code, OK)
    assert.equal(full.statuses[0]!.current_limit?.requests_per_unit, 20)
    assert.equal((await ask('midWild', 'barab')).overall_code, OVER_LIMIT)
    assert.equal((await ask('midWild', 'bar123b')).overall_code, OK, 'another value has its own counter')
    assert.equal((await ask('multiWild', 'foo1bar2baz', 10)).statuses[0]!.current_limit?.requests_per_unit, 10)
    assert.equal((await ask('multiWild', 'foo1bar2baz')).overall_code, OVER_LIMIT)
    const unmatched = await ask('multiWild', 'foo1baz', 1000)
    assert.equal(unmatched.overall_code, OK)
    assert.equal(unmatched.statuses[0]!.current_limit ?? undefined, undefined, 'no pattern matches: no limit')
  })

  test('share_threshold: every value the wildcard matches draws on one counter', async () => {
    assert.equal((await ask('multiroute', 'svcAepBrpc', 50)).overall_code, OK)
    const other = await ask('multiroute', 'svc-other-ep-x-rpc')
    assert.equal(other.overall_code, OVER_LIMIT, 'a different value matched by the same pattern shares the spent counter')
    assert.equal(other.statuses[0]!.current_limit?.requests_per_unit, 50)
    assert.equal((await ask('files', 'files/a.txt', 99)).overall_code, OK)
    assert.equal((await ask('files', 'files/b.txt')).overall_code, OK)
    assert.equal((await ask('files', 'files/c.txt')).overall_code, OVER_LIMIT)
    assert.equal((await ask('file', 'test1', 50)).overall_code, OK, 'an exact value counts alone, apart from test*')
    assert.equal((await ask('file', 'test2', 100)).overall_code, OK)
    assert.equal((await ask('file', 'test3')).overall_code, OVER_LIMIT)
  })
})

for (const workers of ['1', '2'])
  test(`a bad configuration at start (its misspelled_key.yaml), ${workers} thread(s): calls answer UNKNOWN "no rate limit configuration loaded" until a good one loads`, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fv-rls-bad-start-'))
    copyFileSync(join(ROOT, 'test/fixtures/rls/upstream/misspelled_key.yaml'), join(dir, 'config.yaml'))
    const gw = await startGateway({
      FAIRVISOR_MODE: 'decision_service',
      FAIRVISOR_GRPC_PORT: '0',
      FAIRVISOR_RLS_CONFIG: dir,
      FAIRVISOR_WORKERS: workers,
    })
    const line = await gw.waitForLog((l) => typeof l.msg === 'string' && l.msg.startsWith('fairvisor listening'))
    const c = grpcClients(line.grpcPort as number)
    try {
      const req = { domain: 'test-domain', descriptors: [{ entries: [{ key: 'key1', value: 'value1' }] }] }
      await assert.rejects(
        c.shouldRateLimit(req),
        (e: { code: number; details: string }) => e.code === Code.UNKNOWN && e.details === 'no rate limit configuration loaded',
      )
      writeFileSync(
        join(dir, 'config.yaml'),
        'domain: test-domain\ndescriptors:\n  - key: key1\n    value: value1\n    rate_limit: {unit: day, requests_per_unit: 5}\n',
      )
      // Polled: with worker threads the loaded configuration reaches each worker a moment after the log line.
      const deadline = Date.now() + 20_000
      for (;;) {
        const r = (await c.shouldRateLimit(req).catch(() => undefined)) as Answer | undefined
        if (r !== undefined) {
          assert.equal(r.statuses[0]!.current_limit?.requests_per_unit, 5)
          break
        }
        assert.ok(Date.now() < deadline, 'the good configuration never answered')
        await new Promise((r) => setTimeout(r, 50))
      }
    } finally {
      c.close()
      await gw.stop()
    }
  })
