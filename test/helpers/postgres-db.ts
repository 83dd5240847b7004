/**
 * PostgreSQL for store tests: the machine's server (127.0.0.1:5432, trust
 * auth, database `test`, or FAIRVISOR_TEST_PG_URL), a table prefix unique to
 * the run, and dropping everything that prefix created afterwards.
 */
import assert from 'node:assert/strict'
import pg from 'pg'
import { PostgresStore, type PostgresStoreOptions } from '../../src/store/postgres/store.js'
import { parsePostgresUrl } from '../../src/store/postgres/url.js'

export const PG_URL = process.env.FAIRVISOR_TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test'

/** A prefix no other run uses (pid and time), valid as an identifier. */
export const uniquePrefix = (label: string): string => `fvt_${label}_${process.pid}_${Date.now().toString(36)}_`

export async function openStore(prefix: string, extra: Partial<PostgresStoreOptions> = {}, url = PG_URL): Promise<PostgresStore> {
  const s = new PostgresStore({ target: parsePostgresUrl(url), timeoutMs: 2000, poolSize: 4, prefix, unlogged: true, ...extra })
  if (!(await s.ready(5000))) throw new Error(`no PostgreSQL at ${url}`)
  return s
}

/** Runs one statement on a connection of its own. */
export async function sql<R extends pg.QueryResultRow = pg.QueryResultRow>(
  text: string,
  values: unknown[] = [],
  url = PG_URL,
): Promise<R[]> {
  const c = new pg.Client({ connectionString: url })
  await c.connect()
  try {
    return (await c.query<R>(text, values)).rows
  } finally {
    await c.end()
  }
}

/** Whether `key` has a row at all (live or awaiting clean-up). */
export async function anyRow(prefix: string, key: string, url = PG_URL): Promise<boolean> {
  return (await sql(`SELECT 1 FROM ${prefix}counters WHERE key = $1`, [key], url)).length === 1
}

/** The take function's pg_proc row version (a new one with every CREATE OR REPLACE) and its comment (the schema version). */
export async function takeFunctionRow(prefix: string, url = PG_URL): Promise<{ x: string; c: string | null }> {
  const [r] = await sql<{ x: string; c: string | null }>(
    `SELECT xmin::text AS x, obj_description(oid, 'pg_proc') AS c FROM pg_proc WHERE proname = $1`,
    [`${prefix}take`],
    url,
  )
  assert.ok(r, `${prefix}take exists`)
  return r
}

/** Drops the table and functions of `prefix`. */
export async function dropPrefix(prefix: string, url = PG_URL): Promise<void> {
  const fns = [
    'take(text[], float8[], int[])',
    'adjust(text[], float8[])',
    'adjust(text[], float8[], float8[])',
    'lock(text[])',
    'save(text[], bool[], float8[], float8[], float8[], float8[], float8[])',
    'snap(float8)',
  ]
  await sql(`DROP TABLE IF EXISTS ${prefix}counters; ${fns.map((f) => `DROP FUNCTION IF EXISTS ${prefix}${f};`).join(' ')}`, [], url)
}
