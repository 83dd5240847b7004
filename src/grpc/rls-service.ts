/**
 * The Rate Limit Service v3 (`envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit`)
 * over an envoyproxy/ratelimit configuration: the call's descriptors are
 * matched against the compiled configuration of its domain
 * (grpc/rls-compile.ts, rls-plan.ts) and decided by the engine like any
 * request (one store call: enforce descriptors all or nothing, shadow ones in
 * their own group; the fail policy; metrics and logs). Answers one
 * DescriptorStatus per descriptor, in request order (decision/rls-answer.ts),
 * and, with RESPONSE_DYNAMIC_METADATA, dynamic_metadata (decision/rls-metadata.ts),
 * or, when the store failed, an error as envoyproxy/ratelimit does (or the
 * fail policy's statuses: FAIRVISOR_RLS_STORE_FAILURE).
 */
import type { Context } from '@opentelemetry/api'
import type { Decide, DecideLimits } from '../decision/decide.js'
import type { Decision } from '../engine/decision.js'
import {
  OK,
  OVER_LIMIT,
  failedStatus,
  limitStatus,
  mergeDecision,
  noLimitStatus,
  rateLimitResponse,
  storeFailed,
  storeFailureMessage,
  UNKNOWN,
  type DescriptorStatus,
  type RateLimitResponse,
  type RlsHeaderNames,
} from '../decision/rls-answer.js'
import { dynamicMetadata, type Struct } from '../decision/rls-metadata.js'
import { InvalidGrpcRequest } from '../errors.js'
import type { Outcome } from '../store/store.js'
import { decideDescriptors } from './rls-bundle.js'
import { compileRls, type LimitOverride, type RlsDomain } from './rls-compile.js'
import { UNIT_OF_CODE, type RlsConfig } from './rls-config.js'
import type { Entry } from './rls-match.js'
import { planDescriptors, type PlannedDescriptor } from './rls-plan.js'
import { countWithHits } from './rls-stats.js'
import { GrpcStatus } from './status.js'
import { GrpcFailure } from './wire.js'

export interface RateLimitRequest {
  domain?: string
  descriptors?: Array<{
    entries?: Array<{ key?: string; value?: string }>
    limit?: { requests_per_unit?: number; unit?: number } | null
    hits_addend?: { value?: number } | null
  }>
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
   * STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT, only the descriptors that go over are charged.
   */
  chargeRejected: boolean
  /** SHADOW_MODE: no call is answered OVER_LIMIT (its statuses still say which descriptors are over). */
  shadowMode?: boolean
  /** QUOTA_MODE: every descriptor is in quota_mode (but an `unlimited` one). */
  quotaMode?: boolean
  /** RESPONSE_DYNAMIC_METADATA: answers carry dynamic_metadata. */
  dynamicMetadata?: boolean
  /**
   * FAIRVISOR_RLS_STORE_FAILURE. `error`: a call whose store failed (the configuration's limits or a bundle's) is
   * answered gRPC UNKNOWN with the store's error, as envoyproxy/ratelimit answers a Redis error, and Envoy's
   * failure_mode_deny decides; `policy` (or absent): the fail policy's statuses (OK open, OVER_LIMIT closed).
   */
  storeFailure?: 'error' | 'policy'
  /** Every answer (metrics). `domain` is a configured one or undefined; `overall` UNKNOWN when answered the store's error. */
  answered(domain: string | undefined, overall: number, storeFailed: boolean): void
  /** Each checked descriptor (envoyproxy/ratelimit's statistics): `after`, its counter with its hits; undefined when the store did not answer. */
  counted?(name: string, domain: RlsDomain, entries: readonly Entry[], p: PlannedDescriptor, after: number | undefined): void
}

/** A descriptor's limit override; its unit must be one (envoyproxy/ratelimit's process stops on one it does not know). */
function override(l: { requests_per_unit?: number; unit?: number } | null | undefined, i: number): LimitOverride | undefined {
  if (l === undefined || l === null) return undefined
  const unit = UNIT_OF_CODE[l.unit ?? 0]
  if (unit === undefined) throw new InvalidGrpcRequest(`descriptor ${i} has a limit override of unknown unit ${l.unit ?? 0}`)
  return { requestsPerUnit: l.requests_per_unit ?? 0, unit }
}

type Descriptor = { entries: Entry[]; hits: number; limit?: LimitOverride }

/** The request's descriptors as entries, validated (envoyproxy/ratelimit refuses an empty domain or descriptor list the same way). */
function parse(req: RateLimitRequest): { domain: string; descriptors: Descriptor[] } {
  if (!req.domain) throw new InvalidGrpcRequest('rate limit domain must not be empty')
  if (!req.descriptors?.length) throw new InvalidGrpcRequest('rate limit descriptor list must not be empty')
  const hits = req.hits_addend || 1
  return {
    domain: req.domain,
    descriptors: req.descriptors.map((d, i): Descriptor => {
      // A descriptor without entries matches no limit: OK with none, as envoyproxy/ratelimit answers it.
      const entries = (d.entries ?? []).map((e) => {
        if (!e.key) throw new InvalidGrpcRequest(`descriptor ${i} has an entry without a key`)
        return { key: e.key, value: e.value ?? '' }
      })
      // A present wrapper is the descriptor's own count, 0 included (Envoy's check-only call; its
      // encoder leaves a 0 out, so the wrapper decodes empty); an absent one takes the request's.
      const own = d.hits_addend
      const out: Descriptor = { entries, hits: own !== undefined && own !== null ? Number(own.value ?? 0) : hits }
      const limit = override(d.limit, i)
      if (limit !== undefined) out.limit = limit
      return out
    }),
  }
}

const NONE: readonly PlannedDescriptor[] = []
/** An unlimited descriptor's limit_remaining (decision/rls-answer.ts unlimitedStatus). */
const UNLIMITED = 0xffffffff

/** The configured metadata of the descriptors that passed (not OVER_LIMIT), in request order, as envoyproxy/ratelimit merges it. */
function passedMetadata(planned: readonly PlannedDescriptor[], statuses: readonly DescriptorStatus[]): Struct[] {
  const out: Struct[] = []
  for (const p of planned) if (p.answer.metadata !== undefined && statuses[p.index]!.code !== OVER_LIMIT) out.push(p.answer.metadata)
  return out
}

/**
 * A descriptor of a rejected call, from its counter read after the call: over its limit when its
 * count with its own hits is (whatever its position in the call, as envoyproxy/ratelimit); the
 * requests left counted after its hits when every descriptor was charged, before them when only
 * those going over were (a charged one is over: it reports none left).
 */
function afterReject(p: PlannedDescriptor, read: Outcome, charged: boolean, later: number): Outcome {
  // Charged: the count read includes the hits of later descriptors on the same counter (upstream
  // increments them one after the other); not charged: each is the count before the call.
  const count = charged ? read.value - later : read.value
  const after = charged ? count : count + p.cost
  return { allowed: after <= p.answer.current.requests_per_unit, value: count, retryAfter: read.retryAfter }
}

/**
 * STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT, as envoyproxy/ratelimit applies it: of a rejected call,
 * the descriptors whose count before it plus their own hits goes over are charged, the others not.
 */
const goingOver =
  (planned: readonly PlannedDescriptor[]) =>
  (i: number, read: Outcome): boolean =>
    read.value + planned[i]!.cost > planned[i]!.answer.current.requests_per_unit

/** The hits of the descriptors after each one on its counter (usually none: a counter appears once). */
function laterHits(planned: readonly PlannedDescriptor[]): number[] {
  const sums = new Map<string, number>()
  const later = new Array<number>(planned.length)
  for (let i = planned.length - 1; i >= 0; i--) {
    const p = planned[i]!
    const key = `${+p.shadow}${p.rule.counterPrefix}${p.composite}` // an override may count apart on the same entries
    later[i] = sums.get(key) ?? 0
    sums.set(key, later[i]! + p.cost)
  }
  return later
}

/** The error a call is answered when its store failed (already counted by `answered`, not a refused call). */
export class StoreFailure extends GrpcFailure {}

export function createShouldRateLimit(o: RlsOptions) {
  const storeError = o.storeFailure === 'error'
  return (req: RateLimitRequest, then: (err: Error | GrpcFailure | null, res?: RateLimitResponse) => void, trace?: Context): void => {
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
    const planned = domain === undefined ? NONE : planDescriptors(domain, parsed.descriptors, statuses, o.shadowMode)
    // QUOTA_MODE: every descriptor is a quota one, limited or not, but an unlimited one (the only status planning set).
    let quota: boolean[] | undefined = o.quotaMode ? statuses.map((s) => s.limit_remaining !== UNLIMITED) : undefined
    const answer = (failed: boolean): void => {
      if (!o.quotaMode) for (const p of planned) if (p.answer.quota === true) (quota ??= [])[p.index] = true
      // A store failure is the fail policy's answer, whatever QUOTA_MODE or SHADOW_MODE say (a failure fails every check alike).
      const res = rateLimitResponse(statuses, o.responseHeaders, failed ? undefined : quota, o.headerNames)
      // SHADOW_MODE, as envoyproxy/ratelimit: the call OK, statuses and headers as they are.
      if (o.shadowMode && !failed) res.overall_code = OK
      if (o.dynamicMetadata) res.dynamic_metadata = dynamicMetadata(req, passedMetadata(planned, statuses))
      o.answered(domain === undefined ? undefined : parsed.domain, res.overall_code, failed)
      then(null, res)
    }
    const fail = (d: Decision): void => {
      o.answered(domain === undefined ? undefined : parsed.domain, UNKNOWN, true)
      then(new StoreFailure(GrpcStatus.UNKNOWN, storeFailureMessage(d)))
    }
    o.decideLimits(
      domain,
      planned,
      (d, outcomes, read) => {
        const failed = storeFailed(d)
        const later = read === undefined ? undefined : laterHits(planned)
        for (let i = 0; i < planned.length; i++) {
          const p = planned[i]!
          const out = read?.[i] ? afterReject(p, outcomes![i]!, o.chargeRejected, later![i]!) : outcomes?.[i]
          statuses[p.index] = failed ? failedStatus(d) : limitStatus(p.answer, out)
          const after = failed || out === undefined ? undefined : countWithHits(out, p.cost, read?.[i] === true, o.chargeRejected)
          o.counted?.(parsed.domain, domain!, parsed.descriptors[p.index]!.entries, p, after)
        }
        // Counted first: envoyproxy/ratelimit counts a call's hits whatever its store answered.
        if (failed && storeError) return fail(d)
        if (o.decide && o.bundleLoaded?.()) {
          decideDescriptors(o.decide, parsed.domain, parsed.descriptors, trace, (ds) => {
            const down = storeError ? ds.find(storeFailed) : undefined
            if (down !== undefined) return fail(down)
            for (let i = 0; i < ds.length; i++) statuses[i] = mergeDecision(statuses[i]!, ds[i]!)
            answer(failed)
          })
        } else answer(failed)
      },
      // One descriptor rejected is one going over: charged, without a predicate to make.
      o.chargeRejected || planned.length < 2 || goingOver(planned),
      trace,
    )
  }
}
