/**
 * Per-request metrics without per-request prom-client work. prom-client
 * hashes a label object on every inc()/observe() — about a third of a
 * reject's CPU time. Here a request adds to plain numbers (one Map lookup by
 * a short key); the prom-client metrics receive the accumulated deltas when
 * scraped (their collect() hook), so what /metrics shows is exact.
 */
import type { Counter, Gauge, Registry } from 'prom-client'

interface Pending<L extends string> {
  labels: Record<L, string>
  n: number
}

/** Counter increments keyed by a caller-built string, flushed at scrape time. */
export class DeferredCounter<L extends string> {
  private readonly pending = new Map<string, Pending<L>>()

  constructor(counter: Counter<L>) {
    const flush = (): void => {
      for (const p of this.pending.values()) {
        if (p.n !== 0) counter.inc(p.labels, p.n)
        p.n = 0
      }
    }
    ;(counter as unknown as { collect: () => void }).collect = flush
  }

  /**
   * `key` must identify `labels`; `makeLabels` runs only the first time a key is seen, with the
   * key (a function made once, not a closure per call, keeps the hot path free of allocations).
   */
  inc(key: string, makeLabels: (key: string) => Record<L, string>, n = 1): void {
    const p = this.pending.get(key)
    if (p !== undefined) p.n += n
    else this.pending.set(key, { labels: makeLabels(key), n })
  }
}

/**
 * A counter with three labels, found by their values through nested Maps: no key string is
 * built per call. Label values on the hot path are fixed strings (reason codes, policy ids)
 * whose hashes V8 keeps, so three lookups cost a fraction of hashing one fresh joined key.
 */
export class DeferredCounter3<L extends string> {
  private readonly tree = new Map<string, Map<string, Map<string, Pending<L>>>>()

  constructor(
    counter: Counter<L>,
    private readonly names: readonly [L, L, L],
  ) {
    ;(counter as unknown as { collect: () => void }).collect = () => {
      for (const m1 of this.tree.values())
        for (const m2 of m1.values())
          for (const p of m2.values()) {
            if (p.n !== 0) counter.inc(p.labels, p.n)
            p.n = 0
          }
    }
  }

  inc(a: string, b: string, c: string, n = 1): void {
    let m1 = this.tree.get(a)
    if (m1 === undefined) this.tree.set(a, (m1 = new Map()))
    let m2 = m1.get(b)
    if (m2 === undefined) m1.set(b, (m2 = new Map()))
    const p = m2.get(c)
    if (p !== undefined) p.n += n
    else m2.set(c, { labels: { [this.names[0]]: a, [this.names[1]]: b, [this.names[2]]: c } as Record<L, string>, n })
  }
}

/** Last value per label set, copied into the gauge at scrape time. */
export class DeferredGauge<L extends string> {
  private readonly latest = new Map<string, Pending<L>>()

  constructor(gauge: Gauge<L>) {
    ;(gauge as unknown as { collect: () => void }).collect = () => {
      for (const p of this.latest.values()) gauge.set(p.labels, p.n)
    }
  }

  set(key: string, makeLabels: (key: string) => Record<L, string>, value: number): void {
    const p = this.latest.get(key)
    if (p !== undefined) p.n = value
    else this.latest.set(key, { labels: makeLabels(key), n: value })
  }
}

/**
 * A label-less Prometheus histogram kept in a typed array and exposed through
 * prom-client's registry (which formats whatever get() returns).
 */
export class FastHistogram {
  readonly type = 'histogram'
  readonly aggregator = 'sum'
  private readonly counts: Float64Array
  private sum = 0
  private count = 0

  constructor(
    readonly name: string,
    readonly help: string,
    private readonly buckets: readonly number[],
    registry: Registry,
  ) {
    this.counts = new Float64Array(buckets.length)
    registry.registerMetric(this as never)
  }

  observe(value: number): void {
    const b = this.buckets
    let i = 0
    while (i < b.length && value > b[i]!) i++
    if (i < b.length) this.counts[i]!++
    this.sum += value
    this.count++
  }

  reset(): void {
    this.counts.fill(0)
    this.sum = 0
    this.count = 0
  }

  get() {
    const values: { labels: Record<string, string | number>; value: number; metricName: string }[] = []
    let cumulative = 0
    for (let i = 0; i < this.buckets.length; i++) {
      cumulative += this.counts[i]!
      values.push({ labels: { le: this.buckets[i]! }, value: cumulative, metricName: `${this.name}_bucket` })
    }
    values.push({ labels: { le: '+Inf' }, value: this.count, metricName: `${this.name}_bucket` })
    values.push({ labels: {}, value: this.sum, metricName: `${this.name}_sum` })
    values.push({ labels: {}, value: this.count, metricName: `${this.name}_count` })
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator }
  }
}
