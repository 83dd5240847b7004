/**
 * Setting the PostgreSQL store's schema up, cheaply when nothing changed and
 * safely when several gateways start at once, on PostgreSQL and YugabyteDB:
 *
 * - The version of the installed schema (a hash of its statements, kept as
 *   the comment of the `take` function) is read first, with the server's
 *   `version()`. When it is the current one, nothing is created or replaced:
 *   on distributed SQL each CREATE OR REPLACE FUNCTION is a schema change that
 *   fails the other gateways' calls in flight (a rolling restart under load).
 * - Otherwise the statements run in one transaction holding
 *   pg_advisory_xact_lock, the version read again under the lock, so
 *   instances starting together run them one after the other.
 * - Where that lock is unavailable (YugabyteDB before 2.25.1 or with
 *   advisory locks off: 0A000; a role without EXECUTE on it: 42501; a server
 *   without it: 42883), they run one by one, the version comment last, and a
 *   race with another instance (already exists, a concurrent catalog update,
 *   a serialization failure) is met by reading the version again and retrying
 *   after a jittered pause.
 *
 * The table is created UNLOGGED unless the server reports YugabyteDB (its
 * version() has `-YB-`; before 2024.2 it refuses UNLOGGED, later ignores it)
 * or the setting says otherwise (FAIRVISOR_PG_UNLOGGED).
 */
import { createHash } from 'node:crypto'
import type pg from 'pg'
import { backoffMs } from './retry.js'
import { schemaStatements } from './sql.js'
import type { StoreLog } from '../remote.js'

/** What the store needs to know of the server it talks to. */
export interface ServerInfo {
  yugabyte: boolean
}

/** FAIRVISOR_PG_UNLOGGED: a choice, or `auto` (UNLOGGED except on YugabyteDB). */
export type UnloggedSetting = boolean | 'auto'

/** Advisory lock key for schema creation: a constant of ours ("fvsc"), shared by every instance. */
const SCHEMA_LOCK = 0x66767363
/** The advisory lock is not there to take: not supported, not permitted, not defined. */
const NO_LOCK = new Set(['0A000', '42501', '42883'])
/** Another instance is creating the same objects: already exists (table, object, function), a unique catalog entry, a conflict. */
const RACE = new Set(['42P07', '42710', '42723', '23505', '40001', '40P01'])
/** Tries of the statements without the lock before their error is given up to the caller (which reconnects and tries again). */
const TRIES = 8

const codeOf = (e: unknown): string => String((e as { code?: unknown } | null)?.code ?? '')
/** A race with another instance's DDL; XX000 is PostgreSQL's "tuple concurrently updated" and older YugabyteDB's catalog version mismatch. */
const isRace = (e: unknown): boolean =>
  RACE.has(codeOf(e)) || (codeOf(e) === 'XX000' && /concurrent|catalog version|schema version/i.test((e as Error).message))

/** The comment that marks the installed schema as these statements' (the table's persistence is left out: it is fixed at creation). */
export function schemaVersion(prefix: string): string {
  return `fairvisor schema ${createHash('sha256').update(schemaStatements(prefix, false).join(';\n')).digest('hex').slice(0, 16)}`
}

const takeSignature = (prefix: string): string => `${prefix}take(text[], float8[], int[])`

/** The server's version() and the installed schema's version (null without the table or the function). */
async function installed(client: pg.Client, prefix: string): Promise<{ server: string; version: string | null }> {
  const { rows } = await client.query<{ server: string; version: string | null }>(
    `SELECT version() AS server, CASE WHEN to_regclass($1) IS NULL THEN NULL ELSE obj_description(to_regprocedure($2), 'pg_proc') END AS version`,
    [`${prefix}counters`, takeSignature(prefix)],
  )
  return rows[0]!
}

class NoAdvisoryLock extends Error {}

/** Creates or upgrades the schema of `prefix` when its version is not the current one; tells what the server is. */
export async function setUpSchema(client: pg.Client, prefix: string, unlogged: UnloggedSetting, log?: StoreLog): Promise<ServerInfo> {
  const want = schemaVersion(prefix)
  const found = await installed(client, prefix)
  const yugabyte = /-YB-/.test(found.server)
  if (found.version === want) return { yugabyte }
  const statements = [
    ...schemaStatements(prefix, unlogged === 'auto' ? !yugabyte : unlogged),
    `COMMENT ON FUNCTION ${takeSignature(prefix)} IS '${want}'`,
  ]
  try {
    await underLock(client, prefix, want, statements)
  } catch (e) {
    if (!(e instanceof NoAdvisoryLock)) throw e
    log?.('info', { store: 'postgres', err: e.message }, 'postgres advisory lock unavailable; setting the schema up with retries instead')
    await withRetries(client, prefix, want, statements)
  }
  log?.('info', { store: 'postgres', version: want }, 'postgres store schema set up')
  return { yugabyte }
}

async function underLock(client: pg.Client, prefix: string, want: string, statements: readonly string[]): Promise<void> {
  await client.query('BEGIN')
  try {
    try {
      await client.query(`SELECT pg_advisory_xact_lock(${SCHEMA_LOCK})`)
    } catch (e) {
      if (NO_LOCK.has(codeOf(e))) throw new NoAdvisoryLock(`${codeOf(e)} ${(e as Error).message}`)
      throw e
    }
    // Another instance may have set it up while this one waited for the lock.
    if ((await installed(client, prefix)).version !== want) await client.query(statements.join(';\n'))
    await client.query('COMMIT')
  } catch (e) {
    await client.query('ROLLBACK').catch(() => undefined)
    throw e
  }
}

async function withRetries(client: pg.Client, prefix: string, want: string, statements: readonly string[]): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    if ((await installed(client, prefix)).version === want) return
    try {
      // One by one, each in its own transaction: the version comment, last, marks them all in place.
      for (const s of statements) await client.query(s)
      return
    } catch (e) {
      if (!isRace(e) || attempt >= TRIES) throw e
      await new Promise((r) => setTimeout(r, 5 + backoffMs(attempt + 3)))
    }
  }
}
