/**
 * PostgreSQL store: every limit of a request is checked and committed by one call of
 * the `take` function (sql.ts), atomically, all or nothing per group, on the server's clock.
 *
 * Batching (group commit, as ../redis/call.ts): calls made in one event-loop turn leave together as ONE statement on
 * a free connection; while every connection is busy, calls collect and leave together when one frees up. The
 * function evaluates the requests of a batch one after the other, each all or nothing on its own, so batching
 * changes the number of statements, not any outcome. Under light load a call waits for nothing.
 *
 * Deadline: one timer per batch (../batcher.ts), armed at its first call (time spent waiting for a connection
 * counts). When it fires, the batch's unanswered calls fail with a timeout (the fail policy applies); a late answer
 * is ignored (the statement ran whole or not at all). A connection whose statement is still unanswered long after
 * the deadline (a hung server) is dropped and opened again. Serialization failures and deadlocks (40001, 40P01:
 * others' statements, distributed SQL's conflict detection) are sent again after a jittered pause while the deadline
 * leaves room (retry.ts), `take` and `adjust` alike. A statement that fails on one request's data is split until
 * that request stands alone (split()).
 */
import { StoreProtocolError, StoreUnavailableError } from '../../errors.js'
import type pg from 'pg'
import { adjustValues, readOutcomes, replyLength, resetQuery, takeValues, type TakeRequest } from './codec.js'
import { Cleanup } from './cleanup.js'
import { PgConnections, type Slot } from './conn.js'
import { retryable, retryPause } from './retry.js'
import type { UnloggedSetting } from './schema.js'
import { TAKE_REPLY } from './sql.js'
import type { PostgresTarget } from './url.js'
import { Batch, CallTimeoutError, type Pending as BatchCall } from '../batcher.js'
import { callTimerMs, storeError, type StoreLog } from '../remote.js'
import type { Adjustment, ApplyDone, Check, Outcomes, Store, StoreState } from '../store.js'

export interface PostgresStoreOptions {
  target: PostgresTarget
  /** Deadline of each call in ms (FAIRVISOR_STORE_TIMEOUT_MS, default 500 for PostgreSQL). */
  timeoutMs: number
  /** Connections (FAIRVISOR_PG_POOL_SIZE, default 4). */
  poolSize: number
  /** Table and function name prefix (FAIRVISOR_PG_TABLE_PREFIX, default `fairvisor_`). */
  prefix: string
  /** UNLOGGED table: no WAL, emptied after a crash (FAIRVISOR_PG_UNLOGGED, default auto: except on YugabyteDB). */
  unlogged: UnloggedSetting
  /** Clean-up period in ms (default 10000) and rows per statement (default 1000): cleanup.ts. */
  cleanupEveryMs?: number
  cleanupBatch?: number
  log?: StoreLog
}

/** SQLSTATE classes of errors caused by a statement's data (out of range, a program limit, a raise), not by the server: isolated (split()). */
const DATA_CLASSES = new Set(['22', '23', '54', 'P0'])
const isolable = (err: Error): boolean => DATA_CLASSES.has(String((err as { code?: unknown }).code ?? '').slice(0, 2))

interface Pending extends BatchCall, TakeRequest {
  done: ApplyDone
}

export class PostgresStore implements Store {
  readonly kind = 'postgres'
  readonly conns: PgConnections
  /** Statements sent by apply() (each one call of `take`, for one batch of requests). */
  statements = 0
  private next: Batch<Pending> | undefined
  private flushing = false
  /** One-off statements waiting for a free connection. */
  private readonly jobs: ((slot: Slot) => void)[] = []
  private lastCallFailed = false
  private readonly timerMs: number
  private readonly stuckMs: number
  private readonly take: string
  private readonly adjuster: string
  private readonly cleaner: Cleanup

  constructor(private readonly opts: PostgresStoreOptions) {
    this.conns = new PgConnections(opts.target, opts.poolSize, opts.prefix, opts.unlogged, opts.timeoutMs, opts.log)
    this.conns.onFree = () => this.flush()
    this.timerMs = callTimerMs(opts.timeoutMs)
    // Long enough that a short stall (a pause, a checkpoint) resolves on its own; a dead peer is dropped.
    this.stuckMs = Math.max(5000, 20 * opts.timeoutMs)
    this.take = `SELECT ${opts.prefix}take($1::text[], $2::float8[], $3::int[])`
    this.adjuster = `SELECT ${opts.prefix}adjust($1::text[], $2::float8[])`
    this.cleaner = new Cleanup(this.oneOff, () => this.conns.anyReady, opts)
  }

  ready(timeoutMs: number): Promise<boolean> {
    return this.conns.whenReady(timeoutMs)
  }

  apply(checks: readonly Check[], _now: number, done: ApplyDone, reads?: Outcomes): void {
    // `_now` is ignored: the function reads the server clock.
    if (checks.length === 0) return done(null, [])
    let b = this.next
    if (b === undefined) {
      b = this.next = new Batch<Pending>('postgres', this.timerMs, this.fail)
      if (!this.flushing) {
        this.flushing = true
        setImmediate(this.flush)
      }
    }
    b.add({ checks, reads, done, settled: false })
  }

  /**
   * Hands free connections out: first to waiting one-off statements (adjust, clean-up), then to the collecting
   * batch. Without a free connection the batch waits; with none up at all it fails at once (nothing queues).
   */
  private readonly flush = (): void => {
    this.flushing = false
    for (let slot = this.conns.free(); slot !== undefined && this.jobs.length > 0; slot = this.conns.free()) this.jobs.shift()!(slot)
    const b = this.next
    if (b === undefined) return
    if (b.open === 0) return void (this.next = undefined)
    const slot = this.conns.free()
    if (slot === undefined) {
      if (!this.conns.anyReady) this.fail(b, new StoreUnavailableError('no postgres connection is ready'))
      return
    }
    this.next = undefined
    this.send(b, slot)
  }

  /** Sends `calls` (by default the batch's unanswered ones) as one statement. */
  private send(b: Batch<Pending>, slot: Slot, calls: readonly Pending[] = b.unsettled()): void {
    this.statements++
    this.run(slot, { name: `${this.opts.prefix}take`, text: this.take, values: takeValues(calls), rowMode: 'array' }, (err, res) => {
      const pause = err && retryable(err) && b.open > 0 ? retryPause(++b.tries, b.deadline) : undefined
      if (pause !== undefined) return this.later(pause, (next) => this.sendOpen(b, next, calls))
      if (err && calls.length > 1 && isolable(err)) return this.split(b, calls)
      this.lastCallFailed = err !== null
      const reply = res?.rows[0]?.[0] as number[] | undefined
      let off = 0
      for (const p of calls) {
        const n = p.checks.length
        const at = off
        off += replyLength(p)
        if (p.settled) continue
        b.settle(p)
        if (err) p.done(storeError('postgres', err))
        else if (!Array.isArray(reply) || reply.length < off) p.done(new StoreProtocolError('postgres take reply has the wrong length'))
        else {
          // Read-backs follow the request's outcomes.
          if (off - at > n * TAKE_REPLY) readOutcomes(reply, at + n * TAKE_REPLY, n, p.reads)
          p.done(null, readOutcomes(reply, at, n))
        }
      }
    })
  }

  /**
   * The statement failed on the data of some request (it rolled back whole, nothing was charged): each half is
   * sent again on its own, halving again while it fails, so only the offending request gets the error and the
   * fail policy, its neighbours their outcomes, within the deadline, for about log2(batch) statements per offender.
   */
  private split(b: Batch<Pending>, calls: readonly Pending[]): void {
    const mid = calls.length >> 1
    for (const half of [calls.slice(0, mid), calls.slice(mid)]) this.jobs.push((slot) => this.sendOpen(b, slot, half))
    this.flush()
  }

  /** Sends those of `calls` still unanswered; with none, the slot stays free for the next job. */
  private sendOpen(b: Batch<Pending>, slot: Slot, calls: readonly Pending[]): void {
    const open = calls.filter((p) => !p.settled)
    if (open.length > 0) this.send(b, slot, open)
  }

  /** Queues `job` for the next free connection after `ms`. */
  private later(ms: number, job: (slot: Slot) => void): void {
    setTimeout(() => {
      this.jobs.push(job)
      this.flush()
    }, ms)
  }

  /** One statement on `slot`; the slot is busy until it answers. A statement stuck far past the deadline drops its connection. */
  private run(slot: Slot, query: pg.QueryConfig & { rowMode?: 'array' }, cb: (err: Error | null, res?: pg.QueryResult) => void): void {
    const client = slot.client!
    slot.busy = true
    const stuck = setTimeout(
      () => this.conns.drop(slot, client, new StoreUnavailableError(`statement unanswered after ${this.stuckMs} ms`)),
      this.stuckMs,
    )
    client.query(query as pg.QueryConfig, (err: Error | null, res: pg.QueryResult) => {
      clearTimeout(stuck)
      if (slot.client === client) slot.busy = false
      cb(err, res)
      this.flush()
    })
  }

  /** Fails the batch's unanswered calls (at its deadline, or with no connection up). */
  private readonly fail = (b: Batch<Pending>, err: Error): void => {
    this.lastCallFailed = true
    if (this.next === b) this.next = undefined
    b.failOpen((p) => p.done(storeError('postgres', err)))
  }

  /** One adjust statement for all adjustments, on the next free connection, within the deadline. */
  adjust(adjustments: readonly Adjustment[], _now: number, done: (err: Error | null) => void): void {
    if (adjustments.length === 0) return done(null)
    const query = { name: `${this.opts.prefix}adjust`, text: this.adjuster, values: adjustValues(adjustments) }
    this.oneOff(query, this.timerMs, (err) => done(err ? storeError('postgres', err) : null))
  }

  /** Deletes the keys' rows (the admin API), on the next free connection, within the deadline. */
  reset(keys: readonly string[], done: (err: Error | null) => void): void {
    this.oneOff(resetQuery(this.opts.prefix, keys), this.timerMs, (err) => done(err ? storeError('postgres', err) : null))
  }

  /** Deletes expired rows, a bounded batch per statement, at most 10 statements (cleanup.ts); resolves with the number deleted. */
  cleanup(batch?: number): Promise<number> {
    return this.cleaner.run(batch)
  }

  /** Clean-ups that failed (fairvisor_store_cleanup_errors_total). */
  cleanupErrors(): number {
    return this.cleaner.errors
  }

  /** A statement outside the batches, on the next free connection, retried as a batch is; failed after `ms` (at once with none up). */
  readonly oneOff = (query: pg.QueryConfig, ms: number, cb: (err: Error | null, res?: pg.QueryResult) => void): void => {
    if (!this.conns.anyReady) return cb(new StoreUnavailableError('no postgres connection is ready'))
    let answered = false
    let sends = 0
    const deadline = performance.now() + ms
    const timer = setTimeout(() => {
      answered = true
      cb(new CallTimeoutError('postgres', ms))
    }, ms)
    const job = (slot: Slot): void => {
      if (answered) return
      sends++
      this.run(slot, query, (err, res) => {
        if (answered) return
        const pause = err && retryable(err) ? retryPause(sends, deadline) : undefined
        if (pause !== undefined) return this.later(pause, job)
        answered = true
        clearTimeout(timer)
        cb(err, res)
      })
    }
    this.jobs.push(job)
    this.flush()
  }

  state(): StoreState {
    return !this.conns.anyReady ? 'connecting' : this.lastCallFailed ? 'degraded' : 'ok'
  }

  async close(): Promise<void> {
    this.cleaner.stop()
    await this.conns.close()
  }
}
