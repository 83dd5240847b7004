/**
 * FAIRVISOR_LEASE_TABLE_KEYS reaches the lease table of both paths (one
 * thread: the store's own table; workers: the supervisor's), and a table
 * too small for the hot keys shows: 48 leased keys on Redis against 16
 * cells leave at least 32 of them without a cell, which
 * fairvisor_lease_table_full_total counts and one warning reports, while
 * every request is still decided (exactly) and allowed. The default size
 * holds the same 48 keys without a miss.
 */
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { Pool } from 'undici'
import { writeHeaderBucketBundle } from '../helpers/bundles.js'
import { metricValue, startBackend, startGateway, type Backend } from '../helpers/processes.js'
import { startRedis, type RedisServer } from '../helpers/redis-servers.js'

const KEYS = 48
const dir = mkdtempSync(join(tmpdir(), 'fv-lease-keys-'))
// Leases of a minute: every key keeps its cell for the whole test.
const file = writeHeaderBucketBundle(dir, 'hot', { burst: 1000, tokens_per_second: 1, lease: { tokens: 20, ttl_ms: 60_000 } })

describe('FAIRVISOR_LEASE_TABLE_KEYS', () => {
  let redis: RedisServer
  let backend: Backend
  before(async () => {
    redis = await startRedis()
    backend = await startBackend()
  })
  after(async () => {
    await backend.close()
    await redis.stop()
    rmSync(dir, { recursive: true, force: true })
  })

  /** One request on each of 48 keys (16 at a time); the statuses and what /metrics and the log show. */
  async function run(extra: Record<string, string>): Promise<{ codes: Set<number>; full: number; warned: number }> {
    redis.cli('flushall')
    const gw = await startGateway(
      {
        FAIRVISOR_BACKEND_URL: backend.url,
        FAIRVISOR_CONFIG_FILE: file,
        FAIRVISOR_STORE: redis.url,
        FAIRVISOR_REDIS_TIMEOUT_MS: '2000',
        ...extra,
      },
      { timeoutMs: 30_000 },
    )
    const pool = new Pool(gw.url, { connections: 16 })
    try {
      const codes = new Set<number>()
      let next = 0
      await Promise.all(
        Array.from({ length: 16 }, async () => {
          while (next < KEYS) {
            const r = await pool.request({ path: '/x', method: 'GET', headers: { 'x-user': `u${next++}` } })
            await r.body.dump()
            codes.add(r.statusCode)
          }
        }),
      )
      const full = (await metricValue(gw, 'fairvisor_lease_table_full_total')) ?? NaN
      if (full > 0) await gw.waitForLog((l) => String(l.msg).startsWith('lease table full'))
      return { codes, full, warned: gw.logs.filter((l) => String(l.msg).startsWith('lease table full')).length }
    } finally {
      await pool.close()
      await gw.stop()
    }
  }

  for (const workers of ['1', '2']) {
    it(`${workers} worker(s), 16 cells: at least 32 of 48 keys decided exactly, counted and reported; all allowed`, async () => {
      const r = await run({ FAIRVISOR_WORKERS: workers, FAIRVISOR_LEASE_TABLE_KEYS: '16' })
      assert.deepEqual([...r.codes], [200])
      assert.ok(r.full >= KEYS - 16, `keys without a cell counted: ${r.full}`)
      // One line per process and 10 s with one thread; with workers each worker throttles its own.
      assert.ok(r.warned >= 1 && r.warned <= Number(workers), `warnings: ${r.warned}`)
    })
  }

  it('the default size (8192) holds the 48 keys: nothing counted, nothing logged', async () => {
    const r = await run({ FAIRVISOR_WORKERS: '2' })
    assert.deepEqual([...r.codes], [200])
    assert.equal(r.full, 0)
    assert.equal(r.warned, 0)
  })
})
