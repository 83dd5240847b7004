// The PostgreSQL store on the terms distributed SQL sets (docs/stores.md, "Distributed SQL"), driven on the
// machine's PostgreSQL: the schema set up once per version (a start with the current version changes nothing),
// set up without the advisory lock where the store may not take it (a role without EXECUTE on it: 42501) or
// the server has none (YugabyteDB before 2.25: 0A000), clean-up failures counted and logged, and serialization
// failures and deadlocks injected by a competing transaction retried within the deadline, for take and adjust.
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import pg from 'pg'
import type { PostgresStore } from '../../src/store/postgres/store.js'
import { schemaVersion } from '../../src/store/postgres/schema.js'
import type { StoreLog } from '../../src/store/remote.js'
import { applyAsync, type Check } from '../../src/store/store.js'
import { tbCheck } from '../helpers/store.js'
import { dropPrefix, openStore, PG_URL, sql, takeFunctionRow, uniquePrefix } from '../helpers/postgres-db.js'
import { waitFor } from '../helpers/wait.js'

const tb = (key: string, burst: number, cost = 1): Check => tbCheck(`tb:${key}`, burst, 0.001, cost)

/** `PG_URL` on another database, user or with session options (`-c name=value …`). */
function urlWith(o: { db?: string; user?: string; options?: string }): string {
  const u = new URL(PG_URL)
  if (o.db) u.pathname = `/${o.db}`
  if (o.user) u.username = o.user
  if (o.options) u.searchParams.set('options', o.options)
  return u.toString()
}

/** A log that keeps its lines. */
function logLines(): { log: StoreLog; lines: { msg: string; fields: Record<string, unknown> }[] } {
  const lines: { msg: string; fields: Record<string, unknown> }[] = []
  return { lines, log: (_level, fields, msg) => void lines.push({ msg, fields }) }
}

describe('postgres store schema set-up', () => {
  it('a start that finds the current version replaces nothing; an older version is replaced in place', async () => {
    const prefix = uniquePrefix('ver')
    try {
      const first = await openStore(prefix)
      const installed = await takeFunctionRow(prefix)
      assert.equal(installed.c, schemaVersion(prefix), 'the version is recorded with the functions')
      await Promise.all([openStore(prefix), openStore(prefix)]).then((ss) => Promise.all(ss.map((s) => s.close())))
      assert.deepEqual(await takeFunctionRow(prefix), installed, 'two more starts: no CREATE OR REPLACE')
      await sql(`COMMENT ON FUNCTION ${prefix}take(text[], float8[], int[]) IS 'fairvisor schema of an older gateway'`)
      const upgraded = await openStore(prefix)
      const now = await takeFunctionRow(prefix)
      assert.notEqual(now.x, installed.x, 'the functions were replaced')
      assert.equal(now.c, schemaVersion(prefix))
      assert.equal((await applyAsync(first, [tb('v', 3)], 0))[0]!.allowed, true, 'the running store works on')
      await Promise.all([first.close(), upgraded.close()])
    } finally {
      await dropPrefix(prefix)
    }
  })

  describe('without the advisory lock', () => {
    // A database of this run only: its functions' rights and search path are changed, no one else's.
    const db = `fvt_nolock_${process.pid}_${Date.now().toString(36)}`
    const role = `${db}_r`
    before(async () => {
      await sql(`CREATE DATABASE ${db}`)
      await sql(`CREATE ROLE ${role} LOGIN`)
      const asOwner = urlWith({ db })
      await sql(`REVOKE EXECUTE ON FUNCTION pg_advisory_xact_lock(bigint) FROM PUBLIC`, [], asOwner)
      await sql(`GRANT CREATE ON SCHEMA public TO ${role}`, [], asOwner)
      // What YugabyteDB before 2.25 answers (its advisory locks were "not supported yet"), and its version().
      await sql(
        `CREATE SCHEMA yb; CREATE FUNCTION yb.pg_advisory_xact_lock(bigint) RETURNS void LANGUAGE plpgsql AS $$
         BEGIN RAISE EXCEPTION 'advisory locks are not yet implemented' USING ERRCODE = '0A000'; END $$;
         CREATE FUNCTION yb.version() RETURNS text LANGUAGE sql AS
         $$ SELECT 'PostgreSQL 11.2-YB-2.20.1.0-b0 on x86_64-pc-linux-gnu, compiled by clang version 16.0.6, 64-bit'::text $$`,
        [],
        asOwner,
      )
    })
    after(async () => {
      await sql(`DROP DATABASE IF EXISTS ${db} WITH (FORCE)`)
      await sql(`DROP ROLE IF EXISTS ${role}`)
    })

    /** Three stores started together on `url`: one schema, set up without the lock (`code`), its table `persistence` (u: UNLOGGED). */
    async function startTogether(url: string, prefix: string, code: string, persistence: 'u' | 'p'): Promise<void> {
      const logs = [logLines(), logLines(), logLines()]
      const stores = await Promise.all(logs.map((l) => openStore(prefix, { log: l.log, poolSize: 2, unlogged: 'auto' }, url)))
      try {
        for (const s of stores) assert.equal((await applyAsync(s, [tb('nl', 10)], 0))[0]!.allowed, true)
        const [last] = await applyAsync(stores[0]!, [tb('nl', 10, 0)], 0)
        assert.ok(Math.abs(last!.value - 7) < 0.1, `one counter, charged by each store: ${last!.value}`)
        const fellBack = logs.flatMap((l) => l.lines).filter((l) => l.msg.includes('advisory lock unavailable'))
        assert.ok(fellBack.length >= 1, 'the fallback was taken')
        assert.ok(
          fellBack.every((l) => String(l.fields.err).startsWith(code)),
          JSON.stringify(fellBack.map((l) => l.fields.err)),
        )
        assert.equal((await takeFunctionRow(prefix, url)).c, schemaVersion(prefix), 'the version comment was written last')
        const [t] = await sql<{ p: string }>(`SELECT relpersistence AS p FROM pg_class WHERE relname = $1`, [`${prefix}counters`], url)
        assert.equal(t!.p, persistence, 'FAIRVISOR_PG_UNLOGGED=auto: UNLOGGED except on YugabyteDB')
      } finally {
        await Promise.all(stores.map((s) => s.close()))
      }
    }

    it('a role without EXECUTE on pg_advisory_xact_lock (42501): instances starting together set the schema up with retries', async () => {
      const url = urlWith({ db, user: role })
      await assert.rejects(sql('BEGIN; SELECT pg_advisory_xact_lock(1); COMMIT', [], url), { code: '42501' })
      await startTogether(url, uniquePrefix('nl'), '42501', 'u')
    })

    it('a server reporting YugabyteDB whose advisory lock is not supported (0A000, as before 2.25): the same, the table logged', async () => {
      // Its sessions also ask for row locks one at a time, a setting PostgreSQL does not know (42704, passed over).
      const url = urlWith({ db, options: '-c search_path=yb,pg_catalog,public' })
      await assert.rejects(sql('BEGIN; SELECT pg_advisory_xact_lock(1); COMMIT', [], url), { code: '0A000' })
      await startTogether(url, uniquePrefix('yb'), '0A000', 'p')
    })
  })
})

describe('postgres store clean-up failures', () => {
  const prefix = uniquePrefix('cf')
  after(() => dropPrefix(prefix))

  it('are counted and logged, a line a minute at most; expired rows go once it works again', async () => {
    const { log, lines } = logLines()
    const store = await openStore(prefix, { log, cleanupEveryMs: 20 })
    try {
      await sql(`CREATE FUNCTION ${prefix}refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'no deleting today'; END $$;
        CREATE TRIGGER refuse BEFORE DELETE ON ${prefix}counters FOR EACH ROW EXECUTE FUNCTION ${prefix}refuse()`)
      await sql(`INSERT INTO ${prefix}counters (key, expire_at) SELECT 'tb:cf-' || i, 1 FROM generate_series(1, 5) i`)
      await waitFor(() => store.cleanupErrors() >= 3, 'three failed clean-ups')
      const warned = lines.filter((l) => l.msg.includes('clean-up failed'))
      assert.equal(warned.length, 1, 'one line for several failures within a minute')
      assert.match(String(warned[0]!.fields.err), /^P0001 no deleting today/)
      await sql(`DROP TRIGGER refuse ON ${prefix}counters; DROP FUNCTION ${prefix}refuse()`)
      await waitFor(
        async () => (await sql(`SELECT 1 FROM ${prefix}counters WHERE key LIKE 'tb:cf-%'`)).length === 0,
        'expired rows deleted',
      )
    } finally {
      await store.close()
    }
  })
})

describe('postgres store retries of serialization failures and deadlocks', () => {
  const prefix = uniquePrefix('rt')
  let base: PostgresStore
  let other: pg.Client
  before(async () => {
    base = await openStore(prefix)
    other = new pg.Client({ connectionString: PG_URL })
    await other.connect()
  })
  after(async () => {
    await base.close()
    await other.end()
    await dropPrefix(prefix)
  })

  /** Until a session of the store waits for a row lock in `fn` (its statement names the function). */
  const waitsForLock = (fn: string): Promise<void> =>
    waitFor(
      async () =>
        (await sql(`SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE $1`, [`%${prefix}${fn}(%`])).length > 0,
      `the store waiting for a row lock in ${fn}`,
    )

  /** Sets bucket `key` to `tokens` in a transaction left open (the competing transaction). */
  async function holdRow(key: string, tokens: number): Promise<void> {
    await other.query('BEGIN')
    await other.query(`UPDATE ${prefix}counters SET s0 = $2, s1 = extract(epoch FROM clock_timestamp()) WHERE key = $1`, [key, tokens])
  }

  // Sessions in SERIALIZABLE (as in REPEATABLE READ) meet a row changed after their snapshot with 40001, as YugabyteDB's snapshot isolation does.
  const snapshotUrl = urlWith({ options: '-c default_transaction_isolation=serializable' })

  it('take: a serialization failure (40001) is sent again and answered within the deadline, on the committed row', async () => {
    const store = await openStore(prefix, { timeoutMs: 3000 }, snapshotUrl)
    try {
      await applyAsync(base, [tb('sf', 10)], 0)
      await holdRow('tb:sf', 3)
      const sent = store.statements
      const t0 = performance.now()
      const taking = applyAsync(store, [tb('sf', 10)], 0)
      await waitsForLock('take')
      await other.query('COMMIT')
      const [out] = await taking
      assert.equal(store.statements - sent, 2, 'sent twice: the failure, then its retry')
      assert.ok(
        out!.allowed && Math.abs(out!.value - 2) < 0.01,
        `charged once, on the competing transaction's 3 tokens: ${JSON.stringify(out)}`,
      )
      assert.ok(performance.now() - t0 < 3000)
    } finally {
      await store.close()
    }
  })

  it('adjust: a serialization failure (40001) is sent again within the deadline', async () => {
    const store = await openStore(prefix, { timeoutMs: 3000 }, snapshotUrl)
    try {
      await applyAsync(base, [tb('sa', 10)], 0)
      await holdRow('tb:sa', 3)
      const adjusting = new Promise<Error | null>((resolve) =>
        store.adjust([{ key: 'tb:sa', limit: tb('sa', 10).limit, amount: 4 }], 0, resolve),
      )
      await waitsForLock('adjust')
      await other.query('COMMIT')
      assert.equal(await adjusting, null, 'the adjustment succeeded (without a retry it fails with 40001)')
      const [left] = await applyAsync(base, [tb('sa', 10, 0)], 0)
      assert.ok(Math.abs(left!.value - 7) < 0.01, `4 given back to the competing transaction's 3: ${left!.value}`)
    } finally {
      await store.close()
    }
  })

  it('take: a deadlock (40P01) with a transaction locking in the opposite order is sent again within the deadline', async () => {
    // The store's sessions look for the deadlock after 200 ms of waiting, the competing one only after a minute:
    // the store's statement is the one aborted (unless this machine stalls the competitor's lock request past
    // those 200 ms: then the cycle forms later, no one breaks it before the store's statement_timeout, and the
    // scenario is run again).
    const store = await openStore(prefix, { timeoutMs: 5000 }, urlWith({ options: '-c deadlock_timeout=200ms' }))
    try {
      await applyAsync(base, [tb('dl-a', 10), tb('dl-b', 10)], 0)
      await other.query(`SET deadlock_timeout = '60s'`)
      for (let run = 1; ; run++) {
        // A row lock only (an update would hold the store's statement back earlier, in its insert of missing rows).
        await other.query('BEGIN')
        await other.query(`SELECT 1 FROM ${prefix}counters WHERE key = 'tb:dl-b' FOR UPDATE`)
        const sent = store.statements
        const taking = applyAsync(store, [tb('dl-a', 10), tb('dl-b', 10)], 0).then(
          (o) => o,
          (e: Error) => e,
        )
        await waitsForLock('take')
        // Now the competitor wants the row the store's statement holds: a cycle.
        const crossing = other.query(`UPDATE ${prefix}counters SET s0 = 5 WHERE key = 'tb:dl-a'`).then(
          () => null,
          (e: Error) => e,
        )
        const crossed = await crossing
        if (!crossed) await other.query(`UPDATE ${prefix}counters SET s0 = 5 WHERE key = 'tb:dl-b'`)
        await other.query(crossed ? 'ROLLBACK' : 'COMMIT')
        const out = await taking
        if (out instanceof Error && run < 3) continue
        assert.ok(!(out instanceof Error), `answered: ${out}`)
        assert.equal(crossed, null, 'the competitor was not the one aborted')
        // The victim, then its retry; a loaded machine may see the retry wait out the competitor's
        // commit and be sent once more, never past retry.ts's eight sends.
        const sends = store.statements - sent
        assert.ok(sends >= 2 && sends <= 8, `sent ${sends} times: the deadlock victim, then its retry (at most 8 sends)`)
        assert.deepEqual(
          out.map((o) => [o!.allowed, Math.round(o!.value * 100) / 100]),
          [
            [true, 4],
            [true, 4],
          ],
          'both rows charged once, on the competitor’s committed 5 tokens',
        )
        break
      }
    } finally {
      await store.close()
    }
  })
})
