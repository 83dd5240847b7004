/**
 * A limit key of ~3.5 KB (above PostgreSQL's index entry limit) through the
 * real gateway on the machine's PostgreSQL: an attacker sending it and a
 * victim on a short key, concurrently, so their requests share batches. Each
 * gets exactly its burst, and no request meets a store error.
 */
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { Pool } from 'undici'
import { writeHeaderBucketBundle } from '../helpers/bundles.js'
import { metricValue, startBackend, startGateway, type Backend, type GatewayProcess } from '../helpers/processes.js'
import { dropPrefix, PG_URL, uniquePrefix } from '../helpers/postgres-db.js'

const BURST = 20
const REQUESTS = 150

describe('a 3.5 KB limit key on PostgreSQL', () => {
  const prefix = uniquePrefix('long')
  let dir: string
  let backend: Backend
  let gw: GatewayProcess
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'fv-long-key-'))
    const bundle = writeHeaderBucketBundle(dir, 'per_user', { burst: BURST, tokens_per_second: 0.001 })
    backend = await startBackend()
    // A generous deadline: this test is about the key, not about the machine's load.
    gw = await startGateway({
      FAIRVISOR_BACKEND_URL: backend.url,
      FAIRVISOR_CONFIG_FILE: bundle,
      FAIRVISOR_STORE: PG_URL,
      FAIRVISOR_PG_TABLE_PREFIX: prefix,
      FAIRVISOR_FAIL_POLICY: 'open',
      FAIRVISOR_STORE_TIMEOUT_MS: '2000',
    })
  })
  after(async () => {
    await gw?.stop()
    await backend?.close()
    await dropPrefix(prefix)
    rmSync(dir, { recursive: true, force: true })
  })

  it(`is limited exactly (${BURST} of ${REQUESTS}), and a victim on a short key in the same batches gets exactly its own ${BURST}`, async () => {
    const long = randomBytes(2625).toString('base64') // 3500 characters
    const pool = new Pool(gw.url, { connections: 48, pipelining: 1 })
    try {
      const send = async (user: string): Promise<number> => {
        const r = await pool.request({ path: '/', method: 'GET', headers: { 'x-user': user } })
        await r.body.dump()
        return r.statusCode
      }
      // Interleaved and concurrent: both keys travel in the same statements.
      const statuses = await Promise.all(
        Array.from({ length: 2 * REQUESTS }, (_, i) => send(i % 2 ? 'victim' : long).then((s) => ({ attacker: i % 2 === 0, s }))),
      )
      const allowed = (attacker: boolean): number => statuses.filter((x) => x.attacker === attacker && x.s === 200).length
      assert.equal(allowed(true), BURST, 'attacker allowed')
      assert.equal(allowed(false), BURST, 'victim allowed')
      assert.ok(
        statuses.every((x) => x.s === 200 || x.s === 429),
        `statuses: ${[...new Set(statuses.map((x) => x.s))].join(', ')}`,
      )
      assert.equal((await metricValue(gw, 'fairvisor_store_errors_total')) ?? 0, 0, 'no store call failed')
    } finally {
      await pool.close()
    }
  })
})
