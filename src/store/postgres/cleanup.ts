/**
 * The PostgreSQL store's clean-up of expired rows, which every gateway runs
 * every 10 s: a bounded batch per statement, chosen by key and skipping rows
 * a request holds (`DELETE … WHERE key IN (SELECT key … LIMIT n FOR UPDATE
 * SKIP LOCKED)`), which PostgreSQL, YugabyteDB and CockroachDB all run (the
 * two distributed ones have no `ctid`). Each statement carries its own
 * statement_timeout, as the session's is the store deadline, made for requests.
 * A failure is counted (fairvisor_store_cleanup_errors_total) and logged, the
 * first at once and then at most a line a minute with the count since: expired
 * rows read as absent, so nothing is decided wrong meanwhile, but the table
 * grows with every key ever seen until the clean-up works again.
 */
import type pg from 'pg'
import { LogThrottle } from '../../observe/log-throttle.js'
import type { StoreLog } from '../remote.js'

/** A statement outside the request batches (store.ts oneOff). */
export type OneOff = (query: pg.QueryConfig, ms: number, cb: (err: Error | null, res?: pg.QueryResult | pg.QueryResult[]) => void) => void

/** Bound of one clean-up statement in ms (its statement_timeout and its call's). */
export const CLEANUP_MS = 5000

/** At most `n` expired rows, by key. */
export const cleanupSql = (p: string, n: number): string =>
  `SET LOCAL statement_timeout = ${CLEANUP_MS}; DELETE FROM ${p}counters WHERE key IN (SELECT key FROM ${p}counters WHERE expire_at < extract(epoch FROM clock_timestamp())::float8 LIMIT ${Math.max(1, Math.floor(n))} FOR UPDATE SKIP LOCKED)`

/** The store options the clean-up reads (store.ts PostgresStoreOptions). */
export interface CleanupOptions {
  prefix: string
  /** Rows per statement (default 1000) and period in ms (default 10000). */
  cleanupBatch?: number
  cleanupEveryMs?: number
  log?: StoreLog
}

/** The periodic clean-up of one store, and its failures. */
export class Cleanup {
  /** Runs that failed (fairvisor_store_cleanup_errors_total). */
  errors = 0
  private readonly timer: NodeJS.Timeout
  private readonly throttle: LogThrottle

  private readonly prefix: string
  private readonly batch: number
  private readonly log: StoreLog | undefined

  constructor(
    private readonly oneOff: OneOff,
    /** Whether a connection is up: without one there is nothing to clean (the store reports the outage itself). */
    connected: () => boolean,
    opts: CleanupOptions,
    clock: () => number = Date.now,
  ) {
    this.prefix = opts.prefix
    this.batch = opts.cleanupBatch ?? 1000
    this.log = opts.log
    this.throttle = new LogThrottle(clock, 60_000)
    this.timer = setInterval(() => void (connected() ? this.run().catch((e) => this.failed(e)) : undefined), opts.cleanupEveryMs ?? 10_000)
    this.timer.unref()
  }

  /** Deletes expired rows, `batch` per statement, at most 10 statements; resolves with the number deleted. */
  async run(batch = this.batch): Promise<number> {
    let total = 0
    for (let round = 0; round < 10; round++) {
      const n = await new Promise<number>((resolve, reject) =>
        this.oneOff({ text: cleanupSql(this.prefix, batch) }, CLEANUP_MS, (err, res) => {
          if (err) return reject(err)
          // Two statements (SET LOCAL, DELETE): one result each.
          const last = Array.isArray(res) ? res[res.length - 1] : res
          resolve(last?.rowCount ?? 0)
        }),
      )
      total += n
      if (n < batch) break
    }
    return total
  }

  private failed(err: unknown): void {
    this.errors++
    const n = this.throttle.hit()
    if (n === 0) return
    const e = err as { code?: unknown; message?: unknown }
    const why = `${typeof e?.code === 'string' ? `${e.code} ` : ''}${String(e?.message ?? err)}`
    this.log?.(
      'warn',
      { store: 'postgres', err: why, failures: n },
      'postgres store clean-up failed; expired rows stay in the table until it succeeds',
    )
  }

  stop(): void {
    clearInterval(this.timer)
  }
}
