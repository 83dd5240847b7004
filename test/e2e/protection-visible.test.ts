/**
 * Protection never disappears silently (the real gateway process, a real
 * backend): tiny client-chosen costs are raised to min_cost, new keys refused
 * by a full in-process store are counted and logged, missing limit keys are
 * counted with throttled log lines, a backend cut mid-body is logged as an
 * aborted response with the status the client got, and debug logging writes
 * one line per decision.
 */
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, test } from 'node:test'
import { request } from 'undici'
import { metricValue, startBackend, startGateway, type GatewayProcess } from '../helpers/processes.js'

const dir = mkdtempSync(join(tmpdir(), 'fv-visible-'))
after(() => rmSync(dir, { recursive: true, force: true }))
let n = 0
function bundle(rules: object[]): string {
  const file = join(dir, `b${++n}.json`)
  writeFileSync(file, JSON.stringify({ bundle_version: 1, policies: [{ id: 'api', spec: { selector: { pathPrefix: '/' }, rules } }] }))
  return file
}
const tb = (name: string, keys: string[], config: object): object => ({
  name,
  limit_keys: keys,
  algorithm: 'token_bucket',
  algorithm_config: config,
})

async function status(gw: GatewayProcess, path: string, headers: Record<string, string> = {}): Promise<number> {
  const r = await request(gw.url + path, { headers })
  await r.body.dump()
  return r.statusCode
}

const metric = async (gw: GatewayProcess, name: string): Promise<number> => (await metricValue(gw, name)) ?? NaN

describe('protection is visible', () => {
  test('a cost header of 0.001 is charged as 1: a burst of 10 lets 10 of 50 through', async () => {
    const backend = await startBackend()
    const gw = await startGateway({
      FAIRVISOR_BACKEND_URL: backend.url,
      FAIRVISOR_CONFIG_FILE: bundle([
        tb('costly', ['header:x-user'], { tokens_per_second: 0.001, burst: 10, cost_source: 'header:x-request-cost' }),
      ]),
    })
    try {
      const codes: number[] = []
      for (let i = 0; i < 50; i++) codes.push(await status(gw, '/x', { 'x-user': 'u', 'x-request-cost': i % 2 ? '0.001' : '0.0000000001' }))
      assert.equal(codes.filter((c) => c === 200).length, 10)
    } finally {
      await gw.stop()
      await backend.close()
    }
  })

  test('a flood of new keys fills the store: the new keys are refused (503 store_full), counted and logged once; no spent counter is dropped', async () => {
    const backend = await startBackend()
    const gw = await startGateway({
      FAIRVISOR_BACKEND_URL: backend.url,
      FAIRVISOR_SHARED_DICT_SIZE: '1m',
      FAIRVISOR_CONFIG_FILE: bundle([tb('per_user', ['header:x-user'], { tokens_per_second: 0.001, burst: 1 })]),
    })
    try {
      assert.equal(await status(gw, '/x', { 'x-user': 'victim' }), 200)
      assert.equal(await status(gw, '/x', { 'x-user': 'victim' }), 429)
      assert.equal(await metric(gw, 'fairvisor_store_full_total'), 0)
      // 1m holds ≈ 10,000 counters (80 bytes + key): 12,000 new keys, 32 at a time, each spending its only token.
      let next = 0
      const codes = new Map<number, number>()
      await Promise.all(
        Array.from({ length: 32 }, async () => {
          while (next < 12_000) {
            const c = await status(gw, '/x', { 'x-user': `flood-${next++}` })
            codes.set(c, (codes.get(c) ?? 0) + 1)
          }
        }),
      )
      const refused = codes.get(503) ?? 0
      assert.equal((codes.get(200) ?? 0) + refused, 12_000, `statuses: ${JSON.stringify([...codes])}`)
      assert.ok(refused > 1000, `${refused} new keys refused`)
      assert.equal(await metric(gw, 'fairvisor_store_full_total'), refused)
      assert.equal(await metricValue(gw, 'fairvisor_decisions_total', 'reason="store_full"'), refused)
      assert.ok((await metric(gw, 'fairvisor_store_fill_ratio')) > 0.9)
      await gw.waitForLog((l) => String(l.msg).startsWith('in-process store full'))
      const warns = gw.logs.filter((l) => String(l.msg).startsWith('in-process store full'))
      assert.equal(warns.length, 1, 'one throttled line for the whole flood')
      assert.equal(await status(gw, '/x', { 'x-user': 'victim' }), 429, "the victim's spent bucket was kept")
      assert.equal(await status(gw, '/x', { 'x-user': 'flood-0' }), 429, 'so was every counter the flood did get')
    } finally {
      await gw.stop()
      await backend.close()
    }
  })

  test('garbage tokens on a jwt: rule: every skip is counted, the warn lines are throttled', async () => {
    const backend = await startBackend()
    const gw = await startGateway({
      FAIRVISOR_BACKEND_URL: backend.url,
      FAIRVISOR_JWT_HMAC_SECRET: 'x'.repeat(40),
      FAIRVISOR_CONFIG_FILE: bundle([tb('per_sub', ['jwt:sub'], { tokens_per_second: 1, burst: 5 })]),
    })
    try {
      for (let i = 0; i < 300; i++) assert.equal(await status(gw, '/x', { authorization: `Bearer garbage.${i}.token` }), 200)
      assert.equal(await metric(gw, 'fairvisor_descriptor_missing_total'), 300)
      await gw.waitForLog((l) => String(l.msg).startsWith('limit key missing'))
      const lines = gw.logs.filter((l) => String(l.msg).startsWith('limit key missing'))
      assert.ok(lines.length >= 1 && lines.length <= 10, `${lines.length} lines for 300 skips`)
      assert.equal(lines[0]!.requests, 1, 'the first skip is logged at once')
    } finally {
      await gw.stop()
      await backend.close()
    }
  })

  test('a backend that resets after the response head: logged as an aborted 200, not a 502', async () => {
    const backend = await startBackend((_req, res) => {
      res.writeHead(200, { 'content-length': '1000' })
      res.write('partial')
      setTimeout(() => res.socket?.destroy(), 20)
    })
    const gw = await startGateway({ FAIRVISOR_BACKEND_URL: backend.url, FAIRVISOR_CONFIG_FILE: bundle([]) })
    try {
      const r = await request(`${gw.url}/x`)
      assert.equal(r.statusCode, 200)
      await assert.rejects(r.body.text())
      const line = await gw.waitForLog((l) => String(l.msg).startsWith('response aborted'))
      assert.equal(line.status, 200)
      assert.equal(gw.logs.filter((l) => l.msg === 'backend unreachable').length, 0)
    } finally {
      await gw.stop()
      await backend.close()
    }
  })

  test('FAIRVISOR_LOG_LEVEL=debug: one line per decision with policy, rule, key, cost, outcome and duration', async () => {
    const backend = await startBackend()
    const gw = await startGateway({
      FAIRVISOR_BACKEND_URL: backend.url,
      FAIRVISOR_LOG_LEVEL: 'debug',
      FAIRVISOR_CONFIG_FILE: bundle([tb('per_user', ['header:x-user'], { tokens_per_second: 0.001, burst: 2 })]),
    })
    try {
      for (let i = 0; i < 3; i++) await status(gw, '/x', { 'x-user': 'dbg' })
      // Logs are written asynchronously: wait for the third line rather than race it.
      await gw.waitForLog((l) => l.event === 'decision' && l.outcome === 'reject')
      const lines = gw.logs.filter((l) => l.event === 'decision')
      assert.deepEqual(
        lines.map((l) => [l.outcome, l.policy, l.rule, l.key, l.cost]),
        [
          ['allow', 'api', 'per_user', 'tb:per_user:dbg', 1],
          ['allow', 'api', 'per_user', 'tb:per_user:dbg', 1],
          ['reject', 'api', 'per_user', 'tb:per_user:dbg', 1],
        ],
      )
      assert.ok(lines.every((l) => typeof l.durationUs === 'number' && l.level === 'debug'))
    } finally {
      await gw.stop()
      await backend.close()
    }
  })
})
