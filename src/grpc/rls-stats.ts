/**
 * envoyproxy/ratelimit's statistics, counted as it counts them (its
 * limiter/base_limiter.go): per descriptor key (grpc/rls-stats-key.ts)
 * `total_hits` (the hits of every descriptor with a limit, whether or not the
 * store answered), `over_limit` (the hits past the limit), `near_limit` (the
 * hits between NEAR_LIMIT_RATIO of the limit and the limit), `within_limit`
 * (the hits of a descriptor not over) and `shadow_mode` (the hits over of a
 * `shadow_mode` limit); per process `config_load_success` /
 * `config_load_error` and the call errors `redis_error` / `service_error`.
 * Plain numbers added on the call path; /metrics (observe/rls-prometheus.ts)
 * and statsd (observe/statsd.ts) read them.
 */
import type { Outcome } from '../store/store.js'
import type { RlsDomain, RlsRule } from './rls-compile.js'
import type { Entry } from './rls-match.js'
import type { PlannedDescriptor } from './rls-plan.js'
import { detailedKey, keyLabels, limitKeys, overrideKey, requestKey, sanitize, type LimitKey } from './rls-stats-key.js'

/** Upstream's per-key counters, in the order of KeyStats.counts. */
export const RATE_LIMIT_STATS = ['total_hits', 'over_limit', 'near_limit', 'within_limit', 'shadow_mode'] as const
const [TOTAL, OVER, NEAR, WITHIN, SHADOW] = [0, 1, 2, 3, 4] as const

/** Upstream's process counters, each with its statsd name. */
export const SERVICE_STATS = {
  config_load_success: 'ratelimit.service.config_load_success',
  config_load_error: 'ratelimit.service.config_load_error',
  redis_error: 'ratelimit.service.call.should_rate_limit.redis_error',
  service_error: 'ratelimit.service.call.should_rate_limit.service_error',
} as const
export type ServiceStat = keyof typeof SERVICE_STATS

export interface KeyStats {
  /** `<domain>.<level>…`, sanitized: the middle of the statsd names. */
  key: string
  /** The labels upstream's statsd-exporter mapping gives it on /metrics. */
  labels: { domain: string; key1: string; key2?: string }
  /** Totals since start, per RATE_LIMIT_STATS. */
  counts: number[]
  /** What statsd was sent of them. */
  sent: number[]
}

/** The level that stands for every key past the cap on keys built per call. */
export const OVERFLOW = '_overflow'

/**
 * One descriptor's hits into `c`, as upstream's GetResponseDescriptorStatus counts them:
 * `before` and `after` are its counter without and with its hits.
 */
export function account(c: number[], rpu: number, hits: number, before: number, after: number, shadow: boolean, ratio: number): void {
  // Upstream multiplies in float32: the same threshold, rounding included.
  const near = Math.floor(Math.fround(Math.fround(rpu) * Math.fround(ratio)))
  if (after > rpu) {
    // Hits were over only from the limit on; those before it, from the near threshold on, were near it.
    const over = before >= rpu ? hits : after - rpu
    c[OVER]! += over
    if (before < rpu) c[NEAR]! += rpu - Math.max(near, before)
    if (shadow) c[SHADOW]! += over
  } else {
    if (after > near) c[NEAR]! += before >= near ? hits : after - near
    c[WITHIN]! += hits
  }
}

/**
 * A descriptor's counter with its hits, from the outcome its status was made from
 * (grpc/rls-service.ts): an allowed check's figure counts them and a rejected one's does not; a
 * read after a rejected call counts them when the call was charged.
 */
export function countWithHits(out: Outcome, cost: number, read: boolean, charged: boolean): number {
  return (read ? charged : out.allowed) ? out.value : out.value + cost
}

export class RlsStats {
  /** By sanitized key. */
  readonly keys = new Map<string, KeyStats>()
  readonly service: Record<ServiceStat, number> = { config_load_success: 0, config_load_error: 0, redis_error: 0, service_error: 0 }
  /** What statsd was sent of `service`. */
  private readonly sent: Record<ServiceStat, number> = { config_load_success: 0, config_load_error: 0, redis_error: 0, service_error: 0 }
  private readonly limitKeys = new WeakMap<RlsDomain, Map<RlsRule, LimitKey>>()
  /** A configured limit whose key is fixed, straight to its stats: no key built per call. */
  private readonly fixed = new WeakMap<RlsRule, KeyStats>()
  private built = 0

  constructor(
    /** NEAR_LIMIT_RATIO. */
    readonly nearLimitRatio: number,
    /** Keys built from requests (`detailed_metric`, `value_to_metric`, wildcards, a request's own limit) kept apart, at most. */
    readonly maxBuiltKeys: number,
  ) {}

  /** One checked descriptor of domain `name`: `after`, its counter with its hits (undefined: the store did not answer). */
  hit(name: string, domain: RlsDomain, entries: readonly Entry[], p: PlannedDescriptor, after: number | undefined): void {
    const s = this.fixed.get(p.answer) ?? this.statsOf(name, domain, entries, p.answer)
    s.counts[TOTAL]! += p.cost
    if (after !== undefined)
      account(s.counts, p.answer.current.requests_per_unit, p.cost, after - p.cost, after, p.answer.shadow, this.nearLimitRatio)
  }

  count(stat: ServiceStat): void {
    this.service[stat]++
  }

  /** What changed since the last drain, by statsd name. */
  drain(send: (name: string, delta: number) => void): void {
    for (const s of this.keys.values())
      for (let i = 0; i < RATE_LIMIT_STATS.length; i++) {
        const delta = s.counts[i]! - s.sent[i]!
        if (delta === 0) continue
        send(`ratelimit.service.rate_limit.${s.key}.${RATE_LIMIT_STATS[i]}`, delta)
        s.sent[i] = s.counts[i]!
      }
    for (const stat of Object.keys(SERVICE_STATS) as ServiceStat[]) {
      const delta = this.service[stat] - this.sent[stat]
      if (delta === 0) continue
      send(SERVICE_STATS[stat], delta)
      this.sent[stat] = this.service[stat]
    }
  }

  private statsOf(name: string, domain: RlsDomain, entries: readonly Entry[], rule: RlsRule): KeyStats {
    let keys = this.limitKeys.get(domain)
    if (keys === undefined) this.limitKeys.set(domain, (keys = limitKeys(name, domain)))
    const k = keys.get(rule)
    if (k?.fixed !== undefined) {
      const s = this.keyStats(k.fixed)
      this.fixed.set(rule, s)
      return s
    }
    // Not a configured limit: the request's own (its `limit` override), keyed by all its entries as upstream keys it.
    const raw =
      k === undefined
        ? overrideKey(name, entries)
        : k.detailed && !k.shared
          ? detailedKey(name, entries) // no walk needed: nothing on its path keeps a pattern
          : requestKey(name, domain.root, entries, k.detailed)
    const key = sanitize(raw)
    const known = this.keys.get(key)
    if (known !== undefined) return known
    if (this.built >= this.maxBuiltKeys) return this.keyStats(`${sanitize(name)}.${OVERFLOW}`)
    this.built++
    return this.keyStats(key)
  }

  /** The stats of the sanitized `key`, made on first use. */
  keyStats(key: string): KeyStats {
    let s = this.keys.get(key)
    if (s === undefined) this.keys.set(key, (s = { key, labels: keyLabels(key), counts: [0, 0, 0, 0, 0], sent: [0, 0, 0, 0, 0] }))
    return s
  }
}
