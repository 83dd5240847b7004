/**
 * Retry-After jitter of one request, whichever way it arrives: the same
 * bundle in decision_service mode (X-Original-URI `/reject/x?q=2`) and in
 * reverse_proxy mode (`GET /reject/x?q=2`), both from 127.0.0.1, give the
 * same Retry-After, and it is the value of the §7 formula with the query in
 * the identity's path, as Fairvisor Edge's decision service computes it.
 * A kill switch is used because its base (3600 s) does not depend on time.
 */
import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { startBackend, startGateway, type Backend, type GatewayProcess } from '../helpers/processes.js'

/** docs/behaviour.md §7, written out here independently of src/engine/jitter.ts. */
function expectedRetryAfter(base: number, reason: string, ip: string, path: string): number {
  const identity = createHash('sha1').update(`fairvisor-retry-jitter||${ip}|${path}`).digest('hex').slice(0, 8)
  let h = 0
  for (const b of Buffer.from(`retry_jitter:v1|||${reason}||${identity}`)) h = (h * 131 + b) % 1000003
  return Math.max(1, Math.ceil(base + (h / 1000003) * base * 0.5))
}

describe('Retry-After jitter: decision service and proxy agree, query included', () => {
  let backend: Backend
  let dir: string
  let decision: GatewayProcess
  let proxy: GatewayProcess
  before(async () => {
    backend = await startBackend()
    dir = mkdtempSync(join(tmpdir(), 'fv-jitter-'))
    const file = join(dir, 'bundle.json')
    writeFileSync(
      file,
      JSON.stringify({
        bundle_version: 1,
        policies: [],
        kill_switches: [{ scope_key: 'header:x-kill', scope_value: 'on', reason: 'test' }],
      }),
    )
    ;[decision, proxy] = await Promise.all([
      startGateway({ FAIRVISOR_MODE: 'decision_service', FAIRVISOR_CONFIG_FILE: file }),
      startGateway({ FAIRVISOR_BACKEND_URL: backend.url, FAIRVISOR_CONFIG_FILE: file }),
    ])
  })
  after(async () => {
    await Promise.all([decision.stop(), proxy.stop()])
    await backend.close()
    rmSync(dir, { recursive: true, force: true })
  })

  for (const uri of ['/reject/x?q=2', '/reject/x?q=3&a=b', '/reject/x']) {
    test(`${uri}: the same Retry-After in both modes, the §7 value with the query in the path`, async () => {
      const d = await fetch(`${decision.url}/v1/decision`, {
        method: 'POST',
        headers: { 'x-original-method': 'GET', 'x-original-uri': uri, 'x-kill': 'on' },
      })
      const p = await fetch(`${proxy.url}${uri}`, { headers: { 'x-kill': 'on' } })
      assert.equal(d.status, 429)
      assert.equal(p.status, 429)
      const want = expectedRetryAfter(3600, 'kill_switch', '127.0.0.1', uri)
      assert.equal(Number(d.headers.get('retry-after')), want, 'decision service')
      assert.equal(Number(p.headers.get('retry-after')), want, 'reverse proxy')
    })
  }
})
