/**
 * An LLM call held by a throttle stage (a budget at 0 % throttles everything)
 * whose client leaves during the hold is not forwarded, and its reservation
 * is given back: the minute bucket in Redis returns to full.
 */
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { request as httpRequest } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { startFakeLlm } from '../helpers/fake-llm.js'
import { startGateway } from '../helpers/processes.js'
import { readBucket } from '../helpers/redis-servers.js'
import { waitFor } from '../helpers/wait.js'

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, Math.max(0, ms)))
const redisCli = (...args: string[]): string =>
  spawnSync('redis-cli', ['-h', '127.0.0.1', '-p', '6379', ...args], { encoding: 'utf8' }).stdout.trim()

test('a client that leaves while its LLM call is held: not forwarded, reservation given back', async () => {
  const rule = `llm_hold_${process.pid}_${Date.now()}`
  const dir = mkdtempSync(join(tmpdir(), 'fv-llm-hold-'))
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
                name: `${rule}_budget`,
                limit_keys: ['header:x-tenant'],
                algorithm: 'cost_based',
                algorithm_config: {
                  budget: 1e6,
                  period: '1d',
                  staged_actions: [
                    { threshold_percent: 0, action: 'throttle', delay_ms: 1500 },
                    { threshold_percent: 100, action: 'reject' },
                  ],
                },
              },
              {
                name: rule,
                limit_keys: ['header:x-tenant'],
                algorithm: 'token_bucket_llm',
                algorithm_config: {
                  tokens_per_minute: 60,
                  burst_tokens: 5000,
                  default_max_completion: 200,
                  token_source: { estimator: 'simple_word' },
                },
              },
            ],
          },
        },
      ],
    }),
  )
  const llm = await startFakeLlm()
  const gw = await startGateway({
    FAIRVISOR_BACKEND_URL: llm.url,
    FAIRVISOR_CONFIG_FILE: file,
    FAIRVISOR_STORE: 'redis://127.0.0.1:6379',
    FAIRVISOR_FAIL_POLICY: 'closed',
    // Not about deadlines: a loaded machine's Redis call may pass the 50 ms default.
    FAIRVISOR_REDIS_TIMEOUT_MS: '2000',
  })
  const key = `tpm:llm:${rule}:t1`
  // An absent bucket is a full one: a bucket given back to full expires after at least 1 s.
  const tokens = (): number => readBucket((...a) => redisCli(...a), key)?.tokens ?? 5000
  try {
    const body = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'x'.repeat(400) }] })
    const req = httpRequest(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'x-tenant': 't1', 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
    })
    req.on('error', () => undefined)
    const sent = performance.now()
    req.end(body)
    // The reservation (100 prompt + 200 completion) is charged when the call is decided, before its hold.
    await waitFor(() => tokens() <= 5000 - 300 + 1, 'the reservation is charged while the call is held')
    const charged = performance.now()
    req.destroy() // the client leaves during the 1500 ms hold
    await waitFor(() => tokens() >= 5000 - 1e-6, 'the reservation comes back')
    // Back before the hold could have ended (it began after the request was sent): at the client's leaving.
    const back = performance.now() - sent
    assert.ok(back < 1500, `the reservation came back ${Math.round(back)} ms after the request was sent, within its 1500 ms hold`)
    // Past the hold's end (it began before the charge was seen), with time for a forward that should not come.
    await sleep(charged + 1500 + 300 - performance.now())
    assert.equal(llm.count, 0, 'never forwarded')
    assert.ok(tokens() >= 5000 - 1e-6, `the reservation came back: ${tokens()}`)
  } finally {
    await gw.stop()
    await llm.close()
    rmSync(dir, { recursive: true, force: true })
  }
})
