/**
 * Gateways starting while others serve, on one PostgreSQL (the rolling restart that distributed SQL makes
 * costly: each CREATE OR REPLACE FUNCTION there is a schema change failing the calls in flight):
 * - four gateway processes started together on a fresh table prefix (the schema set up once, under the
 *   advisory lock);
 * - two of them restarted together under load on the other two, first with the schema marked as an older
 *   gateway's (they replace the functions while requests run), then with the current one (they replace
 *   nothing: the take function's catalog row is the same before and after);
 * - through all of it every client gets the limit's answer (200 or 429), never the fail policy's 503
 *   (FAIRVISOR_FAIL_POLICY=closed), and no gateway logs a failed store call.
 * Heavy: run under `flock /tmp/fv-heavy.lock`.
 */
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { Pool } from 'undici'
import { schemaVersion } from '../../src/store/postgres/schema.js'
import { writeHeaderBucketBundle } from '../helpers/bundles.js'
import { type Backend, type GatewayProcess, startBackend, startGateway } from '../helpers/processes.js'
import { dropPrefix, PG_URL, sql, takeFunctionRow, uniquePrefix } from '../helpers/postgres-db.js'
import { waitFor } from '../helpers/wait.js'

const USERS = 20
const CLIENTS = 16

describe('gateways starting on one PostgreSQL while others serve', () => {
  const prefix = uniquePrefix('starts')
  let dir: string
  let backend: Backend
  let env: Record<string, string>
  const all: GatewayProcess[] = []
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'fv-pg-starts-'))
    backend = await startBackend()
    env = {
      FAIRVISOR_BACKEND_URL: backend.url,
      FAIRVISOR_CONFIG_FILE: writeHeaderBucketBundle(dir, 'per_user', { burst: 40, tokens_per_second: 20 }),
      FAIRVISOR_STORE: PG_URL,
      FAIRVISOR_PG_TABLE_PREFIX: prefix,
      FAIRVISOR_PG_POOL_SIZE: '2',
      FAIRVISOR_FAIL_POLICY: 'closed',
      // Errors are under test here, not the deadline: a loaded 2-core machine must not turn slow calls into 503s.
      FAIRVISOR_STORE_TIMEOUT_MS: '2000',
    }
  })
  after(async () => {
    await Promise.all(all.map((g) => g.stop()))
    await backend?.close()
    await dropPrefix(prefix)
    rmSync(dir, { recursive: true, force: true })
  })

  const start = async (n: number): Promise<GatewayProcess[]> => {
    // Started together on a machine that also runs the load: a start may take several times its usual second.
    const gws = await Promise.all(Array.from({ length: n }, () => startGateway(env, { timeoutMs: 60_000 })))
    all.push(...gws)
    return gws
  }

  it('4 started together, then 2 restarted together twice under load: every answer is the limit’s, the current schema replaced nothing', async () => {
    const gws = await start(4)
    assert.equal((await takeFunctionRow(prefix)).c, schemaVersion(prefix), 'the schema set up, with its version')
    const loaded = gws.slice(0, 2)
    const pools = loaded.map((g) => new Pool(g.url, { connections: CLIENTS / 2, pipelining: 1 }))
    const statuses = new Map<number, number>()
    const count = (s: number): void => void statuses.set(s, (statuses.get(s) ?? 0) + 1)
    const answered = (): number => [...statuses.values()].reduce((a, b) => a + b, 0)
    let running = true
    const client = async (i: number): Promise<void> => {
      for (let n = 0; running; n++) {
        const r = await pools[i % 2]!.request({ path: '/work', method: 'GET', headers: { 'x-user': `u${(i + n) % USERS}` } })
        await r.body.dump()
        count(r.statusCode)
      }
    }
    const load = Promise.all(Array.from({ length: CLIENTS }, (_, i) => client(i)))
    /** Some requests (a share of what went before) answered since now: the load ran across what happened meanwhile. */
    const moreAnswers = (): Promise<void> => {
      const target = answered() + 100
      return waitFor(() => answered() >= target, 'load answered', 30_000)
    }
    /** `gw` serves: a few requests of its own, answered by the limit. */
    const serves = async (gw: GatewayProcess): Promise<void> => {
      const p = new Pool(gw.url, { connections: 1 })
      for (let i = 0; i < 5; i++) {
        const r = await p.request({ path: '/work', method: 'GET', headers: { 'x-user': `fresh${i}` } })
        await r.body.dump()
        assert.equal(r.statusCode, 200, `a restarted gateway serves (user fresh${i})`)
      }
      await p.close()
    }
    try {
      await moreAnswers()
      // An older gateway's schema: the restarted two replace the functions while the other two serve.
      await sql(`COMMENT ON FUNCTION ${prefix}take(text[], float8[], int[]) IS 'fairvisor schema of an older gateway'`)
      const old = await takeFunctionRow(prefix)
      await Promise.all(gws.slice(2).map((g) => g.stop()))
      const upgraded = await start(2)
      const now = await takeFunctionRow(prefix)
      assert.notEqual(now.x, old.x, 'the functions were replaced')
      assert.equal(now.c, schemaVersion(prefix))
      await moreAnswers()
      for (const g of upgraded) await serves(g)
      // The current schema: the next two replace nothing.
      await Promise.all(upgraded.map((g) => g.stop()))
      for (const g of await start(2)) await serves(g)
      assert.deepEqual(await takeFunctionRow(prefix), now, 'a start on the current schema ran no DDL')
      await moreAnswers()
      // The limit still answers: one key's burst of 200 at once is more than its 40 plus what 20/s
      // refills while a loaded machine serves it (the spread load alone may stay under every key's rate).
      await Promise.all(
        Array.from({ length: 200 }, async (_, i) => {
          const r = await pools[i % 2]!.request({ path: '/work', method: 'GET', headers: { 'x-user': 'hot' } })
          await r.body.dump()
          count(r.statusCode)
        }),
      )
    } finally {
      running = false
      await load
      await Promise.all(pools.map((p) => p.close()))
    }
    const detail = `statuses ${JSON.stringify([...statuses])}`
    console.log(detail)
    assert.deepEqual(
      [...statuses.keys()].filter((s) => s !== 200 && s !== 429),
      [],
      `only the limit's answers: ${detail}`,
    )
    assert.ok((statuses.get(200) ?? 0) > 0 && (statuses.get(429) ?? 0) > 0, `both allowed and limited: ${detail}`)
    for (const g of all) {
      const bad = g.logs.filter(
        (l) => l.msg === 'store call failed' || l.msg === 'store not reachable at start-up; the fail policy applies until it is',
      )
      assert.deepEqual(bad, [], `gateway ${g.port}: no failed store call`)
    }
  })
})
