// PostgreSQL store behaviour beyond the contract: batching, per-request atomicity inside a batch,
// lock order (no deadlocks), concurrent schema creation, expiry and clean-up, an unreachable server.
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { StoreError } from '../../src/errors.js'
import { PostgresStore } from '../../src/store/postgres/store.js'
import { parsePostgresUrl } from '../../src/store/postgres/url.js'
import { applyAsync, type Check } from '../../src/store/store.js'
import { freePort } from '../helpers/processes.js'
import { tbCheck } from '../helpers/store.js'
import { dropPrefix, openStore, sql, uniquePrefix } from '../helpers/postgres-db.js'

const prefix = uniquePrefix('bh')
const tb = (key: string, burst: number, cost = 1): Check => tbCheck(`tb:${key}`, burst, 0.001, cost)

describe('postgres store behaviour', () => {
  let store: PostgresStore
  before(async () => {
    store = await openStore(prefix)
  })
  after(async () => {
    await store.close()
    await dropPrefix(prefix)
  })

  it('requests of one event-loop turn leave as one statement, each all or nothing on its own', async () => {
    const before = store.statements
    await applyAsync(store, [tb('b-empty', 1)], 0) // drained: every request naming it rejects
    const calls = Array.from({ length: 100 }, (_, i) => applyAsync(store, i % 2 ? [tb('b-k', 30)] : [tb('b-k', 30), tb('b-empty', 1)], 0))
    const out = await Promise.all(calls)
    assert.equal(store.statements - before, 2, 'the drain, then one statement for the 100 requests')
    assert.ok(
      out.every((o, i) => i % 2 === 1 || o.some((x) => x?.allowed === false)),
      'every two-key request rejected',
    )
    assert.equal(out.filter((o, i) => i % 2 === 1 && o[0]!.allowed).length, 30, 'only the single-key requests charged b-k')
    const [left] = await applyAsync(store, [tb('b-k', 30, 0)], 0)
    assert.ok(left!.value < 0.1, `b-k drained by exactly 30: ${left!.value}`)
  })

  it('keys named in opposite orders by concurrent stores never deadlock, and stay exact', async () => {
    const other = await openStore(prefix)
    try {
      const runs = Array.from({ length: 120 }, (_, i) =>
        applyAsync(i % 2 ? store : other, i % 3 ? [tb('d-a', 80), tb('d-b', 1000)] : [tb('d-b', 1000), tb('d-a', 80)], 0),
      )
      const out = await Promise.all(runs)
      assert.equal(out.filter((o) => o.every((x) => x?.allowed)).length, 80)
      const [b] = await applyAsync(store, [tb('d-b', 1000, 0)], 0)
      assert.ok(Math.abs(b!.value - 920) < 0.5, `d-b charged only by the 80 allowed requests: ${b!.value}`)
    } finally {
      await other.close()
    }
  })

  it('instances starting together create the schema once, one after the other', async () => {
    const fresh = uniquePrefix('sc')
    try {
      const stores = await Promise.all([openStore(fresh), openStore(fresh), openStore(fresh)])
      for (const s of stores) assert.equal((await applyAsync(s, [tb('s', 5)], 0))[0]!.allowed, true)
      await Promise.all(stores.map((s) => s.close()))
      const [t] = await sql<{ relpersistence: string }>(`SELECT relpersistence FROM pg_class WHERE relname = $1`, [`${fresh}counters`])
      assert.equal(t!.relpersistence, 'u', 'UNLOGGED by default')
    } finally {
      await dropPrefix(fresh)
    }
  })

  it('a row past expire_at reads as absent; the clean-up deletes expired rows in bounded batches and keeps live ones', async () => {
    await applyAsync(store, [tb('x-live', 100, 50)], 0)
    await sql(`INSERT INTO ${prefix}counters (key, s0, s1, expire_at) SELECT 'tb:x-old-' || i, 0, 0, 1 FROM generate_series(1, 25) i`)
    await sql(`INSERT INTO ${prefix}counters (key, s0, s1, expire_at) VALUES ('tb:x-stale', 0, 0, extract(epoch FROM now()) - 1)`)
    const [fresh] = await applyAsync(store, [tb('x-stale', 5)], 0)
    assert.deepEqual(fresh, { allowed: true, value: 4, retryAfter: 0 }, 'an expired empty bucket reads as a full one')
    assert.ok((await store.cleanup(10)) >= 25)
    assert.equal((await sql(`SELECT 1 FROM ${prefix}counters WHERE key LIKE 'tb:x-old-%'`)).length, 0)
    assert.equal((await sql(`SELECT 1 FROM ${prefix}counters WHERE key IN ('tb:x-live', 'tb:x-stale')`)).length, 2)
  })

  it('with no server: connecting, not ready, calls fail at once with a StoreError', async () => {
    const port = await freePort()
    const s = new PostgresStore({
      target: parsePostgresUrl(`postgres://postgres@127.0.0.1:${port}/test`),
      timeoutMs: 1000,
      poolSize: 2,
      prefix,
      unlogged: true,
    })
    try {
      assert.equal(await s.ready(300), false)
      assert.equal(s.state(), 'connecting')
      const t0 = Date.now()
      await assert.rejects(applyAsync(s, [tb('n', 5)], 0), (e: unknown) => e instanceof StoreError && e.code === 'FV_STORE_UNAVAILABLE')
      assert.ok(Date.now() - t0 < 100, 'nothing waits for a reconnect')
    } finally {
      await s.close()
    }
  })
})
