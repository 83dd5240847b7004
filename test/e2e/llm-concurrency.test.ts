/**
 * LLM reservations under concurrency (docs/behaviour.md §5): 64 clients on one tenant,
 * split across two gateway processes sharing one Redis, each sending chat
 * calls back to back for 2 s; the fake backend reports a random completion
 * (0–150 tokens against a reservation of 100 + 100), so calls both give back
 * and overrun. Then: the day counter equals the sum of the usage reported
 * for the allowed calls (no reservation leaks, no settlement lost or doubled),
 * and the tokens used stay within what the minute bucket admits over the run
 * (burst + rate × elapsed) plus one overrun per call that can be in flight.
 */
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { test } from 'node:test'
import { Pool } from 'undici'
import { utcDay } from '../../src/algorithms/llm.js'
import { startFakeLlm } from '../helpers/fake-llm.js'
import { metricSum, startGateway, type GatewayProcess } from '../helpers/processes.js'
import { readBucket } from '../helpers/redis-servers.js'
import { waitFor } from '../helpers/wait.js'

const CLIENTS = 64
const DURATION_MS = 2000
const BURST = 2000
const RATE = 20 // tokens per second (tokens_per_minute 1200)
const MAX_OVERRUN = 50
const cli = (...args: string[]): string =>
  spawnSync('redis-cli', ['-h', '127.0.0.1', '-p', '6379', ...args], { encoding: 'utf8' }).stdout.trim()

test('64 clients, two gateways, one Redis: settled usage is bounded and reservations never leak', { timeout: 60_000 }, async () => {
  const rule = `llm_conc_${process.pid}_${Date.now()}`
  const dir = mkdtempSync(join(tmpdir(), 'fv-llm-conc-'))
  const file = join(dir, 'bundle.json')
  writeFileSync(
    file,
    JSON.stringify({
      bundle_version: 1,
      policies: [
        {
          id: 'chat',
          spec: {
            selector: { pathPrefix: '/v1/' },
            rules: [
              {
                name: rule,
                limit_keys: ['header:x-tenant'],
                algorithm: 'token_bucket_llm',
                algorithm_config: { tokens_per_minute: RATE * 60, burst_tokens: BURST, tokens_per_day: 1_000_000 },
              },
            ],
          },
        },
      ],
    }),
  )
  const llm = await startFakeLlm()
  const env = {
    FAIRVISOR_BACKEND_URL: llm.url,
    FAIRVISOR_CONFIG_FILE: file,
    FAIRVISOR_STORE: 'redis://127.0.0.1:6379',
    FAIRVISOR_REDIS_TIMEOUT_MS: '2000',
    FAIRVISOR_FAIL_POLICY: 'closed',
  }
  const gws: GatewayProcess[] = []
  const pools: Pool[] = []
  try {
    gws.push(await startGateway(env), await startGateway(env))
    for (const gw of gws) pools.push(new Pool(gw.url, { connections: CLIENTS / 2 }))
    const body = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'x'.repeat(400) }], max_tokens: 100 })
    let reported = 0
    let allowed = 0
    let rejected = 0
    const t0 = performance.now()
    const day = utcDay(Date.now())
    const client = async (i: number): Promise<void> => {
      const pool = pools[i % 2]!
      while (performance.now() - t0 < DURATION_MS) {
        const completion = Math.floor(Math.random() * 151)
        const r = await pool.request({
          path: '/v1/chat/completions',
          method: 'POST',
          body,
          headers: {
            'content-type': 'application/json',
            'x-tenant': 'one',
            'x-fake-prompt': '100',
            'x-fake-completion': String(completion),
          },
        })
        await r.body.text()
        if (r.statusCode === 200) {
          allowed++
          reported += 100 + completion
        } else {
          assert.equal(r.statusCode, 429)
          rejected++
        }
      }
    }
    await Promise.all(Array.from({ length: CLIENTS }, (_, i) => client(i)))
    const elapsedS = (performance.now() - t0) / 1000
    // The last settlements follow the last responses: each counts once its store write is done.
    const settled = async (): Promise<number> =>
      (await Promise.all(gws.map((g) => metricSum(g, 'fairvisor_token_settlements_total')))).reduce((a, b) => a + b, 0)
    await waitFor(async () => (await settled()) >= allowed, `the settlements of ${allowed} allowed calls`)
    // A run across 00:00 UTC counts into two day counters: both are the usage.
    let counted: number | undefined
    for (const d of new Set([day, utcDay(Date.now())])) {
      const tokens = readBucket(cli, `tpd:llm:${rule}:one:${d}`)?.tokens
      if (tokens !== undefined) counted = (counted ?? 0) + tokens
    }
    assert.ok(allowed > 5 && rejected > 0, `allowed ${allowed}, rejected ${rejected}`)
    assert.equal(counted, reported, `day counter ${counted} vs usage reported for ${allowed} allowed calls ${reported}`)
    const bound = BURST + RATE * elapsedS + CLIENTS * MAX_OVERRUN
    assert.ok(reported <= bound, `used ${reported} > burst + rate × ${elapsedS.toFixed(2)} s + in-flight overruns = ${bound}`)
    console.log(
      `llm concurrency: ${allowed} allowed, ${rejected} rejected, ${reported} tokens used in ${elapsedS.toFixed(2)} s (admitted at most ${(BURST + RATE * elapsedS).toFixed(0)} + in-flight overruns)`,
    )
  } finally {
    await Promise.all(pools.map((p) => p.close()))
    for (const gw of gws) assert.equal(await gw.stop(), 0)
    await llm.close()
  }
})
