/**
 * No over-grant under concurrency (docs/behaviour.md §5): 64 keep-alive clients hammer one
 * key of a `burst: 10, tokens_per_second: 10` bucket for 3 s (and 1000 requests) through
 * the real gateway; the backend must see at most 10 + 10 × elapsed requests, and no
 * fewer than 10 + 10 × (last request sent − first answer) − 2 (the bucket is not
 * under-granting either; test/helpers/shared-limit.ts).
 */
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { Pool } from 'undici'
import { startBackend, startGateway } from '../helpers/processes.js'
import { writeHeaderBucketBundle } from '../helpers/bundles.js'
import { hammerOneKey } from '../helpers/shared-limit.js'

const CLIENTS = 64
const DURATION_MS = 3000

test(`${CLIENTS} concurrent clients on one key for ${DURATION_MS / 1000} s: backend count within [10 + 10 × (last sent − first answer) − 2, 10 + 10 × elapsed]`, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'fv-ratelimit-load-'))
  const file = writeHeaderBucketBundle(dir, 'one_key', { burst: 10, tokens_per_second: 10 })
  const backend = await startBackend()
  const gw = await startGateway({ FAIRVISOR_BACKEND_URL: backend.url, FAIRVISOR_CONFIG_FILE: file })
  const pool = new Pool(gw.url, { connections: CLIENTS, pipelining: 1 })
  try {
    const { statuses, total, elapsedS, ceiling, floor } = await hammerOneKey([pool], {
      clients: CLIENTS,
      durationMs: DURATION_MS,
      minTotal: 1000,
    })
    const allowed = statuses.get(200) ?? 0
    const detail = `backend ${backend.count}, allowed ${allowed}, total ${total}, elapsed ${elapsedS.toFixed(3)} s, ceiling ${ceiling.toFixed(2)}, floor ${floor.toFixed(2)}, statuses ${JSON.stringify([...statuses])}`
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
