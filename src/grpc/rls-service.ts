/**
 * The Rate Limit Service v3 (`envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit`)
 * over an envoyproxy/ratelimit configuration: the call's descriptors are
 * matched against the compiled configuration of its domain
 * (grpc/rls-compile.ts, rls-plan.ts) and decided by the engine like any
 * request (one store call: enforce descriptors all or nothing, shadow ones in
 * their own group; the fail policy; metrics and logs). Answers one
 * DescriptorStatus per descriptor, in request order (decision/rls-answer.ts).
 */
import type { Decide, DecideLimits } from '../decision/decide.js'
import {
  failedStatus,
  limitStatus,
  mergeDecision,
  noLimitStatus,
  rateLimitResponse,
  storeFailed,
  type DescriptorStatus,
  type RateLimitResponse,
  type RlsHeaderNames,
} from '../decision/rls-answer.js'
import { InvalidGrpcRequest } from '../errors.js'
import type { Outcome } from '../store/store.js'
import { decideDescriptors } from './rls-bundle.js'
import { compileRls, type RlsDomain } from './rls-compile.js'
import type { RlsConfig } from './rls-config.js'
import type { Entry } from './rls-match.js'
import { planDescriptors, type PlannedDescriptor } from './rls-plan.js'
import { countWithHits } from './rls-stats.js'

export interface RateLimitRequest {
  domain?: string
  descriptors?: Array<{ entries?: Array<{ key?: string; value?: string }>; hits_addend?: { value?: number } | null }>
  hits_addend?: number
}

export interface RlsOptions {
  config(): RlsConfig
  /** The engine, for the configuration's limits (decision/decide.ts createLimitDecider). */
  decideLimits: DecideLimits
  /** Add the RateLimit-Limit / -Remaining / -Reset headers envoyproxy/ratelimit adds when its response headers are enabled. */
  responseHeaders: boolean
  /** Their names (LIMIT_*_HEADER); the RateLimit-* names when absent. */
  headerNames?: Readonly<RlsHeaderNames>
  /** The bundle's decider, consulted per descriptor when a bundle is loaded (`descriptor:<key>` limit keys). */
  decide?: Decide
  bundleLoaded?(): boolean
  /**
   * A rejected call charges every descriptor (envoyproxy/ratelimit's default); false:
   * STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT, nothing is charged. As the decider was made.
   */
  chargeRejected: boolean
  /** Every answer (metrics). `domain` is a configured one or undefined. */
  answered(domain: string | undefined, overall: number, storeFailed: boolean): void
  /** Each checked descriptor (envoyproxy/ratelimit's statistics): `after`, its counter with its hits; undefined when the store did not answer. */
  counted?(name: string, domain: RlsDomain, entries: readonly Entry[], p: PlannedDescriptor, after: number | undefined): void
}

/** The request's descriptors as entries, validated (envoyproxy/ratelimit refuses an empty domain or descriptor list the same way). */
function parse(req: RateLimitRequest): { domain: string; descriptors: Array<{ entries: Entry[]; hits: number }> } {
  if (!req.domain) throw new InvalidGrpcRequest('rate limit domain must not be empty')
  if (!req.descriptors?.length) throw new InvalidGrpcRequest('rate limit descriptor list must not be empty')
  const hits = req.hits_addend || 1
  return {
    domain: req.domain,
    descriptors: req.descriptors.map((d, i) => {
      // A descriptor without entries matches no limit: OK with none, as envoyproxy/ratelimit answers it.
      const entries = (d.entries ?? []).map((e) => {
        if (!e.key) throw new InvalidGrpcRequest(`descriptor ${i} has an entry without a key`)
        return { key: e.key, value: e.value ?? '' }
      })
      // A present wrapper is the descriptor's own count, 0 included (Envoy's check-only call; its
      // encoder leaves a 0 out, so the wrapper decodes empty); an absent one takes the request's.
      const own = d.hits_addend
      return { entries, hits: own !== undefined && own !== null ? Number(own.value ?? 0) : hits }
    }),
  }
}

const NONE: readonly PlannedDescriptor[] = []

/**
 * A descriptor of a rejected call, from its counter read after the call: over its limit when its
 * count with its own hits is (whatever its position in the call, as envoyproxy/ratelimit); the
 * requests left counted after its hits when they were charged, before them when not.
 */
function afterReject(p: PlannedDescriptor, read: Outcome, charged: boolean, later: number): Outcome {
  // Charged: the count read includes the hits of later descriptors on the same counter (upstream
  // increments them one after the other); not charged: each is the count before the call.
  const count = charged ? read.value - later : read.value
  const after = charged ? count : count + p.cost
  return { allowed: after <= p.answer.current.requests_per_unit, value: count, retryAfter: read.retryAfter }
}

/** The hits of the descriptors after each one on its counter (usually none: a counter appears once). */
function laterHits(planned: readonly PlannedDescriptor[]): number[] {
  const sums = new Map<string, number>()
  const later = new Array<number>(planned.length)
  for (let i = planned.length - 1; i >= 0; i--) {
    const key = `${+planned[i]!.shadow}${planned[i]!.composite}`
    later[i] = sums.get(key) ?? 0
    sums.set(key, later[i]! + planned[i]!.cost)
  }
  return later
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
    const config = o.config()
    // No configuration (the bundle alone limits RLS calls): nothing to compile.
    const domain = config.size === 0 ? undefined : compileRls(config).get(parsed.domain)
    const statuses: DescriptorStatus[] = parsed.descriptors.map(noLimitStatus)
    const planned = domain === undefined ? NONE : planDescriptors(domain, parsed.descriptors, statuses)
    const answer = (failed: boolean): void => {
      let quota: boolean[] | undefined
      for (const p of planned) if (p.answer.quota === true) (quota ??= [])[p.index] = true
      const res = rateLimitResponse(statuses, o.responseHeaders, quota, o.headerNames)
      o.answered(domain === undefined ? undefined : parsed.domain, res.overall_code, failed)
      then(null, res)
    }
    o.decideLimits(domain, planned, (d, outcomes, read) => {
      const failed = storeFailed(d)
      const later = read === undefined ? undefined : laterHits(planned)
      for (let i = 0; i < planned.length; i++) {
        const p = planned[i]!
        const out = read?.[i] ? afterReject(p, outcomes![i]!, o.chargeRejected, later![i]!) : outcomes?.[i]
        statuses[p.index] = failed ? failedStatus(d) : limitStatus(p.answer, out)
        const after = failed || out === undefined ? undefined : countWithHits(out, p.cost, read?.[i] === true, o.chargeRejected)
        o.counted?.(parsed.domain, domain!, parsed.descriptors[p.index]!.entries, p, after)
      }
      if (o.decide && o.bundleLoaded?.()) {
        decideDescriptors(o.decide, parsed.domain, parsed.descriptors, (ds) => {
          for (let i = 0; i < ds.length; i++) statuses[i] = mergeDecision(statuses[i]!, ds[i]!)
          answer(failed)
        })
      } else answer(failed)
    })
  }
}
