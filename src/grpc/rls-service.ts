/**
 * The Rate Limit Service v3 (`envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit`)
 * over an envoyproxy/ratelimit configuration: each descriptor's limit is a
 * window counter (aligned fixed windows, counted exactly in the store), all
 * the request's enforce descriptors in one store call, shadow ones in their
 * own group. Answers one DescriptorStatus per descriptor, in request order.
 */
import { counterLimit } from '../algorithms/window-counter.js'
import { InvalidGrpcRequest } from '../errors.js'
import type { Check, FailPolicy, Outcome, Outcomes, Store } from '../store/store.js'
import { UNIT_CODE, UNIT_SECONDS, type RlsConfig, type RlsLimit } from './rls-config.js'
import { matchLimit, type Entry } from './rls-match.js'
import { decideDescriptors, mergeDecision } from './rls-bundle.js'
import type { Decide } from '../decision/decide.js'

export const OK = 1
export const OVER_LIMIT = 2

export interface RateLimitRequest {
  domain?: string
  descriptors?: Array<{ entries?: Array<{ key?: string; value?: string }>; hits_addend?: { value?: number } | null }>
  hits_addend?: number
}

export interface DescriptorStatus {
  code: number
  current_limit?: { requests_per_unit: number; unit: number; name?: string }
  limit_remaining: number
  duration_until_reset?: { seconds: number }
}

export interface RateLimitResponse {
  overall_code: number
  statuses: DescriptorStatus[]
  response_headers_to_add?: Array<{ key: string; value: string }>
}

export interface RlsOptions {
  store: Store
  config(): RlsConfig
  failPolicy: FailPolicy
  /** Epoch ms. */
  clock(): number
  /** Add the RateLimit-Limit / -Remaining / -Reset headers envoyproxy/ratelimit adds when its response headers are enabled. */
  responseHeaders: boolean
  /** The bundle's decider, consulted per descriptor when a bundle is loaded (`descriptor:<key>` limit keys). */
  decide?: Decide
  bundleLoaded?(): boolean
  /** Every answer (metrics). `domain` is a configured one or undefined. */
  answered(domain: string | undefined, overall: number, storeFailed: boolean): void
}

interface Planned {
  index: number
  limit: RlsLimit
  check: Check
}

/** The request's descriptors as entries, validated (envoyproxy/ratelimit refuses an empty domain or descriptor list the same way). */
function parse(req: RateLimitRequest): { domain: string; descriptors: Array<{ entries: Entry[]; hits: number }> } {
  if (!req.domain) throw new InvalidGrpcRequest('rate limit domain must not be empty')
  if (!req.descriptors?.length) throw new InvalidGrpcRequest('rate limit descriptor list must not be empty')
  const hits = req.hits_addend || 1
  return {
    domain: req.domain,
    descriptors: req.descriptors.map((d, i) => {
      if (!d.entries?.length) throw new InvalidGrpcRequest(`descriptor ${i} has no entries`)
      const entries = d.entries.map((e) => {
        if (!e.key) throw new InvalidGrpcRequest(`descriptor ${i} has an entry without a key`)
        return { key: e.key, value: e.value ?? '' }
      })
      const own = d.hits_addend?.value
      return { entries, hits: own !== undefined && own !== null ? Number(own) : hits }
    }),
  }
}

const counterKey = (domain: string, entries: readonly Entry[]): string => {
  let key = `rls:${domain}`
  for (const e of entries) key += `_${e.key}_${e.value}`
  return key
}

function status(p: Planned, o: Outcome | undefined): DescriptorStatus {
  const current_limit = {
    requests_per_unit: p.limit.requestsPerUnit,
    unit: UNIT_CODE[p.limit.unit],
    ...(p.limit.name ? { name: p.limit.name } : {}),
  }
  if (o === undefined) return { code: OK, current_limit, limit_remaining: p.limit.requestsPerUnit }
  const remaining = Math.max(0, Math.floor(p.limit.requestsPerUnit - o.value))
  // A shadow limit counts and reports, but never answers OVER_LIMIT.
  return {
    code: o.allowed || p.limit.shadow ? OK : OVER_LIMIT,
    current_limit,
    limit_remaining: o.allowed ? remaining : Math.min(remaining, p.limit.requestsPerUnit),
    duration_until_reset: { seconds: o.retryAfter },
  }
}

function headers(statuses: readonly DescriptorStatus[]): Array<{ key: string; value: string }> | undefined {
  // As envoyproxy/ratelimit: the limited descriptor with the fewest requests left.
  let min: DescriptorStatus | undefined
  for (const s of statuses) if (s.current_limit && (min === undefined || s.limit_remaining < min.limit_remaining)) min = s
  if (min === undefined) return undefined
  return [
    { key: 'RateLimit-Limit', value: String(min.current_limit!.requests_per_unit) },
    { key: 'RateLimit-Remaining', value: String(min.limit_remaining) },
    { key: 'RateLimit-Reset', value: String(min.duration_until_reset?.seconds ?? 0) },
  ]
}

export function createShouldRateLimit(o: RlsOptions) {
  return (req: RateLimitRequest, then: (err: Error | null, res?: RateLimitResponse) => void): void => {
    let parsed: ReturnType<typeof parse>
    try {
      parsed = parse(req)
    } catch (err) {
      if (err instanceof InvalidGrpcRequest) return then(err)
      throw err // a bug, not a bad request: the server answers INTERNAL
    }
    const domainNode = o.config().get(parsed.domain)
    const statuses: DescriptorStatus[] = parsed.descriptors.map(() => ({ code: OK, limit_remaining: 0 }))
    const planned: Planned[] = []
    if (domainNode !== undefined) {
      const limits = parsed.descriptors.map((d) => matchLimit(domainNode, d.entries))
      // `replaces`: a matched limit naming others takes their place (they are neither counted nor reported).
      const replaced = new Set(limits.flatMap((l) => l?.replaces ?? []))
      for (const [index, limit] of limits.entries()) {
        if (limit === undefined || (limit.name !== undefined && replaced.has(limit.name))) continue
        if (limit.unlimited) {
          statuses[index] = { code: OK, limit_remaining: 0xffffffff }
          continue
        }
        const check = {
          key: counterKey(parsed.domain, parsed.descriptors[index]!.entries),
          limit: counterLimit(limit.requestsPerUnit, UNIT_SECONDS[limit.unit], 0),
          cost: parsed.descriptors[index]!.hits,
          shadow: limit.shadow,
        }
        planned.push({ index, limit, check })
      }
    }
    const finish = (outcomes: Outcomes | undefined, storeFailed: boolean): void => {
      for (const [i, p] of planned.entries())
        statuses[p.index] = storeFailed ? { code: o.failPolicy === 'open' ? OK : OVER_LIMIT, limit_remaining: 0 } : status(p, outcomes![i])
      if (o.decide && o.bundleLoaded?.()) {
        decideDescriptors(o.decide, parsed.domain, parsed.descriptors, (ds) => {
          for (const [i, d] of ds.entries()) statuses[i] = mergeDecision(statuses[i]!, d)
          answer(storeFailed)
        })
      } else answer(storeFailed)
    }
    const answer = (storeFailed: boolean): void => {
      const overall = statuses.some((s) => s.code === OVER_LIMIT) ? OVER_LIMIT : OK
      const res: RateLimitResponse = { overall_code: overall, statuses }
      if (o.responseHeaders) res.response_headers_to_add = headers(statuses)
      o.answered(domainNode === undefined ? undefined : parsed.domain, overall, storeFailed)
      then(null, res)
    }
    if (planned.length === 0) return finish([], false)
    o.store.apply(
      planned.map((p) => p.check),
      o.clock() / 1000,
      (err, outcomes) => {
        if (err) return finish(undefined, true)
        const skipped: number[] = [] // indexes into `planned`
        for (let i = 0; i < planned.length; i++) if (outcomes![i] === undefined) skipped.push(i)
        if (skipped.length === 0) return finish(outcomes, false)
        // Checks after a reject in their group were not evaluated: read their counters (cost 0) so every status is true.
        o.store.apply(
          skipped.map((i) => ({ ...planned[i]!.check, cost: 0 })),
          o.clock() / 1000,
          (err2, read) => {
            if (!err2) for (const [j, i] of skipped.entries()) outcomes![i] = read![j]
            finish(outcomes, false)
          },
        )
      },
    )
  }
}
