/**
 * The PostgreSQL store's connections: a fixed number of `pg` clients (slots),
 * each carrying at most one statement at a time, so the store knows which
 * connection is busy, which is free and which is down (a pool would hide
 * that). A slot whose connection fails reconnects in the background every
 * 100–500 ms; calls never wait for a reconnect (the fail policy applies).
 *
 * On the first connection (and again after every connection was lost) the
 * schema is checked and set up when it is not the current one (schema.ts).
 * Each session then sets what the store relies on: no wait for the WAL flush,
 * `statement_timeout` at the store deadline (a statement stuck on a lock or in
 * a server-side retry loop is cancelled, its locks released, when its caller
 * has given up on it), and on YugabyteDB row locks taken one at a time, in the
 * order the lock function asks for (sql.ts).
 */
import pg from 'pg'
import { reconnectDelay, type StoreLog } from '../remote.js'
import { type ServerInfo, setUpSchema, type UnloggedSetting } from './schema.js'
import type { PostgresTarget } from './url.js'
import { StoreUnavailableError } from '../../errors.js'

export interface Slot {
  readonly id: number
  client: pg.Client | undefined
  /** Connected and the schema is in place. */
  ready: boolean
  /** A statement is in flight. */
  busy: boolean
  attempt: number
}

/**
 * SQLSTATEs that mean the store URL is wrong, not that the server is away:
 * bad password (28P01), unknown role or no right to log in (28000), unknown
 * database (3D000), no right to create the schema (42501), a feature of the
 * schema the server does not have (0A000: UNLOGGED forced on YugabyteDB before
 * 2024.2, CockroachDB's PL/pgSQL). Waiting does not fix them, so before the
 * first connection they fail start-up (whenReady).
 */
const REFUSED = new Set(['28P01', '28000', '3D000', '42501', '0A000'])

export class PgConnections {
  readonly slots: Slot[]
  private server: Promise<ServerInfo> | undefined
  private closed = false
  private lastError = ''
  private readonly readyWaiters = new Set<(refused?: Error) => void>()
  /** Set when the server refused the URL before any connection was ready (REFUSED). */
  private refused: Error | undefined
  /** Runs when a slot becomes free or ready (the store sends its next batch). */
  onFree: () => void = () => undefined

  constructor(
    private readonly target: PostgresTarget,
    size: number,
    private readonly prefix: string,
    private readonly unlogged: UnloggedSetting,
    /** Each session's statement_timeout in ms (the store deadline). */
    private readonly statementTimeoutMs: number,
    private readonly log?: StoreLog,
  ) {
    this.slots = Array.from({ length: size }, (_, id) => ({ id, client: undefined, ready: false, busy: false, attempt: 0 }))
    for (const s of this.slots) this.open(s)
  }

  get anyReady(): boolean {
    return this.slots.some((s) => s.ready)
  }

  /** A ready slot with nothing in flight. */
  free(): Slot | undefined {
    for (const s of this.slots) if (s.ready && !s.busy) return s
    return undefined
  }

  /** Resolves true once a connection is ready, false after `ms`; rejects with the reason when the server refuses the URL. */
  whenReady(ms: number): Promise<boolean> {
    if (this.anyReady) return Promise.resolve(true)
    if (this.refused) return Promise.reject(this.refused)
    return new Promise((resolve, reject) => {
      const done = (v: boolean, err?: Error): void => {
        clearTimeout(t)
        this.readyWaiters.delete(onReady)
        if (err) reject(err)
        else resolve(v)
      }
      const onReady = (refused?: Error): void => done(true, refused)
      const t = setTimeout(() => done(false), ms)
      this.readyWaiters.add(onReady)
    })
  }

  private open(slot: Slot): void {
    if (this.closed) return
    // keepAlive: a peer that vanished without a reset is noticed; connect timeout: a hung server does not hold a slot forever.
    const client = new pg.Client({
      connectionString: this.target.connectionString,
      connectionTimeoutMillis: 2000,
      keepAlive: true,
      application_name: 'fairvisor',
    })
    slot.client = client
    client.on('error', (err: Error) => this.drop(slot, client, err))
    client.on('end', () => this.drop(slot, client))
    client.connect((err: Error | undefined) => {
      if (err) return this.drop(slot, client, err)
      this.prepare(client).then(
        () => {
          if (slot.client !== client) return
          slot.ready = true
          slot.attempt = 0
          this.refused = undefined
          if (this.slots.filter((s) => s.ready).length === 1) {
            this.lastError = ''
            this.log?.('info', { store: 'postgres', target: this.target.display }, 'postgres store connected')
          }
          for (const w of [...this.readyWaiters]) w()
          this.onFree()
        },
        (e: Error) => this.drop(slot, client, e),
      )
    })
  }

  /** The schema once per process, then the session's settings. */
  private async prepare(client: pg.Client): Promise<void> {
    // Counters lose little if the last few ms of commits are lost in a crash; not waiting for the WAL flush halves a commit.
    await client.query('SET synchronous_commit = off')
    this.server ??= setUpSchema(client, this.prefix, this.unlogged, this.log).catch((e: Error) => {
      this.server = undefined // the next connection tries again
      throw e
    })
    const { yugabyte } = await this.server
    // Compile the functions in this session now (before the timeout), so the first request does not pay for it within its deadline.
    await client.query(`SELECT ${this.prefix}take('{}', '{}', '{}')`)
    await client.query(`SET statement_timeout = ${Math.max(1, Math.ceil(this.statementTimeoutMs))}`)
    // Batched row locks are taken in no set order: the lock order (sql.ts) needs them one at a time. A server without batching knows no such setting.
    if (yugabyte)
      await client.query('SET yb_explicit_row_locking_batch_size = 1').catch((e: { code?: string }) => {
        if (e.code !== '42704') throw e
      })
  }

  /** Forget a failed connection and open a new one after a pause. */
  drop(slot: Slot, client: pg.Client, err?: Error): void {
    if (slot.client !== client) return
    const wasReady = slot.ready
    slot.client = undefined
    slot.ready = false
    slot.busy = false
    client.removeAllListeners('end')
    client.on('error', () => undefined) // late socket errors of a dropped client
    client.end().catch(() => undefined)
    if (this.closed) return
    if (!this.anyReady) this.server = undefined // a server that comes back may be a new one: check the schema again
    if (wasReady && !this.anyReady)
      this.log?.('warn', { store: 'postgres' }, 'postgres store connection lost; reconnecting (fail policy applies meanwhile)')
    const code = (err as { code?: unknown } | undefined)?.code
    if (err && !this.anyReady && typeof code === 'string' && REFUSED.has(code)) {
      this.refused = new StoreUnavailableError(`${code} ${err.message}`)
      for (const w of [...this.readyWaiters]) w(this.refused)
    }
    if (err && err.message !== this.lastError) {
      this.lastError = err.message
      this.log?.('warn', { store: 'postgres', err: err.message }, 'postgres store connection error')
    }
    setTimeout(() => this.open(slot), reconnectDelay(++slot.attempt)).unref()
  }

  /** End every connection (bounded to 500 ms). */
  async close(): Promise<void> {
    this.closed = true
    const ends = this.slots.map((s) => {
      const c = s.client
      s.client = undefined
      s.ready = false
      if (c === undefined) return undefined
      c.removeAllListeners('end')
      c.on('error', () => undefined)
      return c.end().catch(() => undefined)
    })
    await Promise.race([Promise.all(ends), new Promise((r) => setTimeout(r, 500))])
  }
}
