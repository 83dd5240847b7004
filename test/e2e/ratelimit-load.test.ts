/**
 * No over-grant under concurrency (docs/behaviour.md §5): 64 keep-alive clients hammer one
 * key of a `burst: 10, tokens_per_second: 10` bucket for 3 s through the real
 * gateway; the backend must see at most 10 + 10 × elapsed requests, and no
 * fewer than that minus 2 (the bucket is not under-granting either).
 */
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { test } from 'node:test'
import { Pool } from 'undici'
import { startBackend, startGateway } from '../helpers/processes.js'
import { writeHeaderBucketBundle } from '../helpers/bundles.js'

const CLIENTS = 64
const DURATION_MS = 3000

test(`${CLIENTS} concurrent clients on one key for ${DURATION_MS / 1000} s: backend count within [10 + 10 × duration − 2, 10 + 10 × elapsed]`, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'fv-ratelimit-load-'))
  const file = writeHeaderBucketBundle(dir, 'one_key', { burst: 10, tokens_per_second: 10 })
  const backend = await startBackend()
  const gw = await startGateway({ FAIRVISOR_BACKEND_URL: backend.url, FAIRVISOR_CONFIG_FILE: file })
  const pool = new Pool(gw.url, { connections: CLIENTS, pipelining: 1 })
  try {
    const statuses = new Map<number, number>()
    const t0 = performance.now()
    const deadline = t0 + DURATION_MS
    const client = async (): Promise<void> => {
      while (performance.now() < deadline) {
        const r = await pool.request({ path: '/work', method: 'GET', headers: { 'x-user': 'shared' } })
        await r.body.dump()
        statuses.set(r.statusCode, (statuses.get(r.statusCode) ?? 0) + 1)
      }
    }
    await Promise.all(Array.from({ length: CLIENTS }, client))
    const elapsedS = (performance.now() - t0) / 1000
    const allowed = statuses.get(200) ?? 0
    const total = [...statuses.values()].reduce((a, b) => a + b, 0)
    const ceiling = 10 + 10 * elapsedS
    // Nothing is sent after the deadline: refill after it cannot be granted (the floor stops there).
    const floor = 10 + (10 * DURATION_MS) / 1000 - 2
    const detail = `backend ${backend.count}, allowed ${allowed}, total ${total}, elapsed ${elapsedS.toFixed(3)} s, ceiling ${ceiling.toFixed(2)}, statuses ${JSON.stringify([...statuses])}`
    console.log(detail)
    assert.deepEqual([...statuses.keys()].sort(), [200, 429], detail)
    assert.ok(total > 1000, `the load actually hammered the gateway: ${detail}`)
    assert.equal(backend.count, allowed, detail)
    assert.ok(backend.count <= ceiling, `over-grant: ${detail}`)
    assert.ok(backend.count >= floor, `under-grant (floor ${floor}): ${detail}`)
  } finally {
    await pool.close()
    await gw.stop()
    await backend.close()
    rmSync(dir, { recursive: true, force: true })
  }
})
