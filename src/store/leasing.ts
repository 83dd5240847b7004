/**
 * Local token leases for hot keys on a remote store (opt-in per rule: `algorithm_config.lease: {tokens, ttl_ms}` on a
 * token bucket, which the algorithm puts on its limit as a LeaseDescription; the leasing layer knows no kind).
 * Instead of a store call per request, an instance takes a slice of `tokens` from the shared limit in one atomic call
 * (the request's own cost included) and spends the rest locally for at most `ttl_ms`; the unspent part goes back
 * (`adjust`) when the lease expires, when the rule's limit changes (a bundle reload) and on close (SIGTERM).
 *
 * Leased tokens are taken from the shared bucket before they are spent, so the instances together never grant more
 * than the exact limit: the price is fairness, not safety — up to one slice per instance can sit unused in another
 * instance's lease while this one rejects (README, "Hot keys"). When a slice no longer fits (the bucket is nearly
 * empty) the request is decided exactly, and the key stays exact for `ttl_ms` so that a drained bucket costs one call
 * per request, not two.
 *
 * While a slice is being fetched, other requests on that key wait for it (one fetch per key at a time), then spend
 * from it.
 *
 * The leases themselves live in a LeaseTable (threads/leases.ts): with worker threads the supervisor makes one for
 * the whole process and every worker's LeasingStore spends from it, so a process holds one slice per key and fetches
 * it once, whatever the number of workers; with one thread the store makes its own (FAIRVISOR_LEASE_TABLE_KEYS sizes
 * both). A key that finds no cell in the table is decided exactly, one store call per request as without leases;
 * `onFull` hears of it (a throttled warning) and leaseTableFull() counts it (fairvisor_lease_table_full_total).
 */
import type { LeaseDescription } from '../algorithms/algorithm.js'
import { FetchWaiters } from './lease-waiters.js'
import { DECIDE_EXACT, FETCH, LeaseTable, SPENT, WAIT } from './threads/leases.js'
import type { Adjustment, ApplyDone, Check, Outcomes, Store, StoreState } from './store.js'
import type { Context } from '@opentelemetry/api'

/** Shortest interval between two sweeps of the table (ended exact modes, expired leases whose opener is gone). */
const MIN_SWEEP_MS = 100
const leaseOf = (c: Check): LeaseDescription | undefined => c.limit.lease
const noop = (): void => undefined

export class LeasingStore implements Store {
  readonly kind: string
  readonly leases: LeaseTable
  /** This thread's requests waiting for a fetch (any thread's). */
  private readonly waiting: FetchWaiters
  private sweepTimer: NodeJS.Timeout | undefined
  /** Calls made to the remote store by apply() (tests and benchmarks read it). */
  calls = 0
  /** The remote store's reset (admin API): slices leased before it lapse as usual, and never refill past burst. */
  readonly reset: Store['reset']

  constructor(
    private readonly inner: Store,
    /** Epoch ms. */
    private readonly clock: () => number,
    /** The process's lease table (the supervisor's, with workers); else one of its own. */
    leases?: LeaseTable,
    /** A request found no cell for its key: decided exactly (called once per request that did). */
    private readonly onFull: () => void = noop,
  ) {
    this.kind = inner.kind
    this.reset = inner.reset?.bind(inner)
    this.leases = leases ?? LeaseTable.create()
    this.waiting = new FetchWaiters(this.leases.gens)
  }

  /** Requests of this thread on leased limits decided exactly because the lease table had no cell for their key. */
  leaseTableFull(): number {
    return this.leases.full
  }

  cleanupErrors(): number | undefined {
    return this.inner.cleanupErrors?.()
  }

  /** `reads` (store.ts OnReject) go to the remote store with a call that leases nothing; a leased call makes none. */
  apply(checks: readonly Check[], now: number, done: ApplyDone, reads?: Outcomes, trace?: Context): void {
    let leased = false
    for (let i = 0; i < checks.length && !leased; i++) leased = leaseOf(checks[i]!) !== undefined
    if (!leased) {
      this.calls++
      return this.inner.apply(checks, now, done, reads, trace)
    }
    this.applyLeased(checks, now, done, trace)
  }

  /** `trace`: a traced request's decision span context, for its store call (none when its leases answer it). */
  private applyLeased(checks: readonly Check[], now: number, done: ApplyDone, trace?: Context): void {
    const t = this.leases
    const nowMs = this.clock()
    const out: Outcomes = new Array(checks.length)
    const local: number[] = []
    const remote: number[] = []
    const sent: Check[] = []
    const fetches = new Set<string>()
    const full = t.full
    for (let i = 0; i < checks.length; i++) {
      const c = checks[i]!
      const cfg = leaseOf(c)
      const taken = cfg === undefined ? DECIDE_EXACT : t.take(c.key, c.limit, cfg, c.cost, nowMs)
      if (taken === SPENT) {
        out[i] = { allowed: true, value: t.value, retryAfter: 0 }
        local.push(i)
        continue
      }
      if (taken === WAIT && !fetches.has(c.key)) {
        // Another request (of any worker) fetches this key: undo this one's takes, and run it again once that fetch ends.
        this.giveBack(checks, local)
        for (const key of fetches) t.release(key, 0)
        this.flushReturns()
        return this.waiting.wait(t.group, t.gen, () => this.applyLeased(checks, now, done, trace))
      }
      remote.push(i)
      if (taken === FETCH) {
        fetches.add(c.key)
        sent.push({ ...c, cost: cfg!.tokens })
      } else sent.push(c) // exact (or this request's second check on a key it is fetching)
    }
    if (t.full !== full) this.onFull()
    this.flushReturns()
    if (sent.length === 0) return done(null, out)
    this.calls++
    const answered: ApplyDone = (err, o) => {
      if (err) {
        this.giveBack(checks, local)
        for (const key of fetches) t.release(key, 0)
        this.flushReturns()
        return done(err)
      }
      const rejected = [false, false]
      let sliceRefused = false
      for (let k = 0; k < sent.length; k++) {
        const r = o![k]
        if (r === undefined || r.allowed) continue
        rejected[sent[k]!.shadow ? 1 : 0] = true
        if (sent[k]!.cost !== checks[remote[k]!]!.cost) sliceRefused = true
      }
      const at = this.clock()
      if (sliceRefused) {
        // The slice did not fit: decide this request exactly, and stay exact on those keys for a lease period.
        this.giveBack(checks, local)
        for (const key of fetches) t.release(key, at + leaseOf(checks.find((c) => c.key === key)!)!.ttlMs)
        this.scheduleSweep()
        this.flushReturns()
        return this.applyLeased(checks, now, done, trace)
      }
      for (let k = 0; k < sent.length; k++) {
        const i = remote[k]!
        const r = o![k]
        const c = checks[i]!
        if (r === undefined || !(r.allowed && sent[k]!.cost !== c.cost) || rejected[c.shadow ? 1 : 0]) {
          out[i] = r
          continue
        }
        const left = sent[k]!.cost - c.cost
        this.open(c, left, r.value, at)
        fetches.delete(c.key)
        out[i] = { allowed: true, value: r.value + left, retryAfter: 0 }
      }
      // Fetches that opened no lease (their group was rejected: nothing was taken) end; waiters go on.
      for (const key of fetches) t.release(key, 0)
      // A rejected group commits nothing: local takes of that group go back to their leases.
      this.giveBack(
        checks,
        local.filter((i) => rejected[checks[i]!.shadow ? 1 : 0]),
      )
      this.cutAfterRejects(checks, out)
      this.flushReturns()
      done(null, out)
    }
    this.inner.apply(sent, now, answered, undefined, trace)
  }

  private open(c: Check, tokens: number, left: number, at: number): void {
    const cfg = leaseOf(c)!
    const lease = this.leases.open(c.key, c.limit, cfg, tokens, left, at)
    if (lease === undefined) return
    const timer = setTimeout(() => {
      this.leases.end(lease.cell, lease.serial)
      this.flushReturns()
    }, cfg.ttlMs)
    timer.unref()
    this.scheduleSweep()
  }

  private giveBack(checks: readonly Check[], indexes: readonly number[]): void {
    for (const i of indexes) {
      const c = checks[i]!
      this.leases.refund(c.key, c.limit, leaseOf(c)!, c.cost)
    }
  }

  /** Give the unspent tokens of the leases ended here back to the remote store. */
  private flushReturns(done: (err: Error | null) => void = noop): void {
    const returns: Adjustment[] = this.leases.returns
    if (returns.length === 0) return done(null)
    this.leases.returns = []
    this.inner.adjust(returns, this.clock() / 1000, done)
  }

  /**
   * While the table holds anything, sweep it every MIN_SWEEP_MS: exact modes
   * end and expired leases give their tokens back even when the thread that
   * opened them is gone, and a stream of ever-new keys cannot fill it.
   */
  private scheduleSweep(): void {
    if (this.sweepTimer) return
    this.sweepTimer = setTimeout(() => {
      this.sweepTimer = undefined
      this.leases.sweep(this.clock())
      this.flushReturns()
      if (this.leases.used > 0) this.scheduleSweep()
    }, MIN_SWEEP_MS)
    this.sweepTimer.unref()
  }

  /** Per-key bookkeeping held now in the process's table (leases, fetches, exact modes), plus this thread's waiting keys. */
  get trackedKeys(): number {
    return this.leases.used + this.waiting.size
  }

  /** Per group, the checks after its first reject get no outcome (the store contract). */
  private cutAfterRejects(checks: readonly Check[], out: Outcomes): void {
    const cut = [false, false]
    for (let i = 0; i < checks.length; i++) {
      const g = checks[i]!.shadow ? 1 : 0
      if (cut[g]) out[i] = undefined
      else if (out[i] !== undefined && !out[i]!.allowed) cut[g] = true
    }
  }

  adjust(adjustments: readonly Adjustment[], now: number, done: (err: Error | null) => void): void {
    this.inner.adjust(adjustments, now, done)
  }

  state(): StoreState {
    return this.inner.state()
  }

  ready(timeoutMs: number): Promise<boolean> {
    return this.inner.ready(timeoutMs)
  }

  /**
   * Gives every unspent lease of the process back (bounded by the store's own
   * deadline), then closes the store. With workers each closing worker does
   * this; a lease is emptied under its lock, so each slice goes back once, and
   * leases a worker still serving opens later go back at its own close.
   */
  async close(): Promise<void> {
    if (this.sweepTimer) clearTimeout(this.sweepTimer)
    this.leases.sweep(this.clock(), true)
    await new Promise<void>((resolve) => this.flushReturns(() => resolve()))
    await this.inner.close()
  }
}
