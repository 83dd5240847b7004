/**
 * Local token leases for hot keys on a shared store (opt-in per rule:
 * `algorithm_config.lease: {tokens, ttl_ms}` on a token bucket). Instead of a
 * store call per request, an instance takes a slice of `tokens` from the
 * shared bucket in one atomic call (the request's own cost included) and
 * spends the rest locally for at most `ttl_ms`; the unspent part goes back
 * (`adjust`) when the lease expires, when the rule's limit changes (a bundle
 * reload) and on close (SIGTERM).
 *
 * Leased tokens are taken from the shared bucket before they are spent, so
 * the instances together never grant more than the exact limit: the price is
 * fairness, not safety — up to one slice per instance can sit unused in
 * another instance's lease while this one rejects (README, "Hot keys").
 * When a slice no longer fits (the bucket is nearly empty) the request is
 * decided exactly, and the key stays exact for `ttl_ms` so that a drained
 * bucket costs one call per request, not two.
 *
 * While a slice is being fetched, other requests on that key wait for it
 * (one fetch per key at a time), then spend from it.
 */
import { EPSILON } from '../algorithms/algorithm.js'
import type { BucketLimit, LeaseConfig } from '../algorithms/token-bucket.js'
import type { Adjustment, ApplyDone, Check, Outcomes, Store, StoreState } from './store.js'

interface Lease {
  limit: Check['limit']
  /** Unspent local tokens. */
  tokens: number
  /** Tokens the shared bucket had left when the slice was taken (for RateLimit-Remaining). */
  bucketLeft: number
  timer: NodeJS.Timeout
}

/** Shortest interval between two sweeps of the exact-mode keys (each sweep walks the whole map). */
const MIN_SWEEP_MS = 100

const leaseOf = (c: Check): LeaseConfig | undefined => (c.limit as BucketLimit & { lease?: LeaseConfig }).lease

export class LeasingStore implements Store {
  readonly kind: string
  private readonly leases = new Map<string, Lease>()
  /** Keys whose slice is being fetched → requests waiting for it. */
  private readonly fetching = new Map<string, (() => void)[]>()
  /** Keys decided exactly until this time (ms): their last slice did not fit. Swept (sweep()). */
  private readonly exactUntil = new Map<string, number>()
  private sweepTimer: NodeJS.Timeout | undefined
  /** Calls made to the shared store by apply() (tests and benchmarks read it). */
  calls = 0

  constructor(
    private readonly inner: Store,
    /** Epoch ms. */
    private readonly clock: () => number,
  ) {
    this.kind = inner.kind
  }

  apply(checks: readonly Check[], now: number, done: ApplyDone): void {
    let leased = false
    for (let i = 0; i < checks.length && !leased; i++) leased = leaseOf(checks[i]!) !== undefined
    if (!leased) {
      this.calls++
      return this.inner.apply(checks, now, done)
    }
    for (const c of checks) {
      const waiting = leaseOf(c) && this.fetching.get(c.key)
      if (waiting) return void waiting.push(() => this.apply(checks, now, done))
    }
    this.applyLeased(checks, now, done)
  }

  private applyLeased(checks: readonly Check[], now: number, done: ApplyDone): void {
    const out: Outcomes = new Array(checks.length)
    const local: number[] = []
    const remote: number[] = []
    const sent: Check[] = []
    const fetches = new Set<string>()
    for (let i = 0; i < checks.length; i++) {
      const c = checks[i]!
      const cfg = leaseOf(c)
      if (cfg === undefined) {
        remote.push(i)
        sent.push(c)
        continue
      }
      const lease = this.current(c)
      if (lease !== undefined && lease.tokens + EPSILON >= c.cost) {
        lease.tokens -= c.cost
        out[i] = { allowed: true, value: lease.bucketLeft + lease.tokens, retryAfter: 0 }
        local.push(i)
        continue
      }
      remote.push(i)
      if (fetches.has(c.key) || this.exact(c.key) || c.cost >= cfg.tokens) sent.push(c)
      else {
        fetches.add(c.key)
        this.fetching.set(c.key, [])
        sent.push({ ...c, cost: cfg.tokens })
      }
    }
    if (sent.length === 0) return done(null, out)
    this.calls++
    this.inner.apply(sent, now, (err, o) => {
      if (err) {
        this.giveBack(checks, local)
        this.release(fetches)
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
      if (sliceRefused) {
        // The slice did not fit: decide this request exactly, and stay exact on those keys for a lease period.
        this.giveBack(checks, local)
        for (const key of fetches) this.markExact(key, leaseOf(checks.find((c) => c.key === key)!)!.ttlMs)
        this.release(fetches)
        return this.applyLeased(checks, now, done)
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
        this.open(c, left, r.value)
        out[i] = { allowed: true, value: r.value + left, retryAfter: 0 }
      }
      // A rejected group commits nothing: local takes of that group go back to their leases.
      this.giveBack(
        checks,
        local.filter((i) => rejected[checks[i]!.shadow ? 1 : 0]),
      )
      this.cutAfterRejects(checks, out)
      this.release(fetches)
      done(null, out)
    })
  }

  /** Whether `key` is decided exactly now; an entry found expired is dropped. */
  private exact(key: string): boolean {
    const until = this.exactUntil.get(key)
    if (until === undefined) return false
    if (until > this.clock()) return true
    this.exactUntil.delete(key)
    return false
  }

  private markExact(key: string, ttlMs: number): void {
    this.exactUntil.set(key, this.clock() + ttlMs)
    this.sweepTimer ??= this.scheduleSweep(ttlMs)
  }

  /**
   * Drops the expired exact-mode entries, so that a stream of distinct keys (an attacker
   * rotating limit keys) cannot grow the map: an entry outlives its TTL by at most one
   * sweep period. Runs only while the map is not empty; the timer never holds the process.
   */
  private scheduleSweep(periodMs: number): NodeJS.Timeout {
    const t = setTimeout(
      () => {
        this.sweepTimer = undefined
        const now = this.clock()
        for (const [key, until] of this.exactUntil) if (until <= now) this.exactUntil.delete(key)
        if (this.exactUntil.size > 0) this.sweepTimer = this.scheduleSweep(periodMs)
      },
      Math.max(MIN_SWEEP_MS, periodMs),
    )
    t.unref()
    return t
  }

  /** Per-key bookkeeping held now (leases, keys being fetched, keys in exact mode): bounded by the live keys. */
  get trackedKeys(): number {
    return this.leases.size + this.fetching.size + this.exactUntil.size
  }

  /** The live lease of `c`'s key; a lease of another limit (the bundle changed) is returned first. */
  private current(c: Check): Lease | undefined {
    const lease = this.leases.get(c.key)
    if (lease === undefined || lease.limit === c.limit) return lease
    this.endLease(c.key, lease)
    return undefined
  }

  private open(c: Check, tokens: number, bucketLeft: number): void {
    const old = this.leases.get(c.key)
    if (old) this.endLease(c.key, old)
    const timer = setTimeout(() => this.endLease(c.key, lease), leaseOf(c)!.ttlMs)
    timer.unref()
    const lease: Lease = { limit: c.limit, tokens, bucketLeft, timer }
    this.leases.set(c.key, lease)
  }

  /** Ends a lease and gives its unspent tokens back to the shared bucket. */
  private endLease(key: string, lease: Lease, done: (err: Error | null) => void = () => undefined): void {
    clearTimeout(lease.timer)
    if (this.leases.get(key) === lease) this.leases.delete(key)
    if (lease.tokens <= EPSILON) return done(null)
    this.inner.adjust([{ key, limit: lease.limit, amount: lease.tokens }], this.clock() / 1000, done)
    lease.tokens = 0
  }

  private giveBack(checks: readonly Check[], indexes: readonly number[]): void {
    for (const i of indexes) {
      const lease = this.leases.get(checks[i]!.key)
      if (lease) lease.tokens += checks[i]!.cost
    }
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

  private release(keys: Iterable<string>): void {
    for (const key of keys) {
      const waiters = this.fetching.get(key)
      this.fetching.delete(key)
      if (waiters) for (const w of waiters) w()
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

  /** Gives every unspent lease back (bounded by the store's own deadline), then closes the store. */
  async close(): Promise<void> {
    if (this.sweepTimer) clearTimeout(this.sweepTimer)
    const returns = [...this.leases].map(([key, lease]) => new Promise<void>((resolve) => this.endLease(key, lease, () => resolve())))
    await Promise.all(returns)
    await this.inner.close()
  }
}
