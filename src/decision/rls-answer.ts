/**
 * Decision → answer for the Rate Limit Service (`ShouldRateLimit`), as
 * envoyproxy/ratelimit answers: one DescriptorStatus per descriptor, made
 * from the engine's outcome of the descriptor's check (or from the decision
 * when the store failed, or folded with a bundle's decision on the
 * descriptor), and the response with its overall code and, when enabled,
 * the RateLimit-* headers. Pure: no I/O.
 */
import type { Decision } from '../engine/decision.js'
import type { Struct } from './rls-metadata.js'
import type { Outcome } from '../store/store.js'

/** RateLimitResponse.Code (UNKNOWN: no answer was made, the call was answered a gRPC error). */
export const UNKNOWN = 0
export const OK = 1
export const OVER_LIMIT = 2

/** RateLimitResponse.RateLimit: a descriptor's limit as the answer states it (built once per configured limit). */
export interface CurrentLimit {
  requests_per_unit: number
  unit: number
  name?: string
}

export interface DescriptorStatus {
  code: number
  current_limit?: CurrentLimit
  limit_remaining: number
  duration_until_reset?: { seconds: number }
}

export interface RateLimitResponse {
  overall_code: number
  statuses: DescriptorStatus[]
  response_headers_to_add?: Array<{ key: string; value: string }>
  /** RESPONSE_DYNAMIC_METADATA (decision/rls-metadata.ts). */
  dynamic_metadata?: Struct
}

/** What a descriptor's status says of its configured limit. */
export interface AnsweredLimit {
  current: CurrentLimit
  /** shadow_mode: counted and reported, never OVER_LIMIT. */
  shadow: boolean
  /** quota_mode: OVER_LIMIT itself, but the call only when every quota descriptor of it is. */
  quota?: boolean
}

/** A descriptor whose limit is `unlimited`: no check, the most a uint32 says. */
export const unlimitedStatus = (): DescriptorStatus => ({ code: OK, limit_remaining: 0xffffffff })

/** A descriptor with no limit (nor any configured domain): OK. */
export const noLimitStatus = (): DescriptorStatus => ({ code: OK, limit_remaining: 0 })

/** The status of a descriptor's check from its outcome (undefined: the store could not say; the limit is reported untouched). */
export function limitStatus(l: AnsweredLimit, o: Outcome | undefined): DescriptorStatus {
  const current_limit = l.current
  const perUnit = current_limit.requests_per_unit
  if (o === undefined) return { code: OK, current_limit, limit_remaining: perUnit }
  return {
    code: o.allowed || l.shadow ? OK : OVER_LIMIT,
    current_limit,
    // Over the limit (shadow_mode too) leaves nothing, whatever the count short of it, as envoyproxy/ratelimit says.
    limit_remaining: o.allowed ? Math.max(0, Math.floor(perUnit - o.value)) : 0,
    duration_until_reset: { seconds: o.retryAfter },
  }
}

/** The store failed: the engine's decision carries the fail policy (allowed when open). */
export function storeFailed(d: Decision): boolean {
  return d.reason === 'service_unavailable' || d.reason === 'store_unavailable_fail_open'
}

/**
 * The message of the gRPC error a call whose store failed is answered (FAIRVISOR_RLS_STORE_FAILURE=error),
 * as envoyproxy/ratelimit answers a Redis error with its text: the store's error, named as the store's.
 */
export const storeFailureMessage = (d: Decision): string => `rate limit store unavailable: ${d.storeError ?? d.reason}`

/** A checked descriptor's status when the store failed: the fail policy's answer. */
export const failedStatus = (d: Decision): DescriptorStatus => ({ code: d.allowed ? OK : OVER_LIMIT, limit_remaining: 0 })

/** A bundle's decision on a descriptor folded into its status: a reject (or a fail-closed store) is OVER_LIMIT. */
export function mergeDecision(s: DescriptorStatus, d: Decision): DescriptorStatus {
  if (d.reason === 'no_bundle_loaded') return s
  const over = !d.allowed
  if (s.current_limit !== undefined || d.limit === undefined) return over ? { ...s, code: OVER_LIMIT, limit_remaining: 0 } : s
  return {
    code: over ? OVER_LIMIT : s.code,
    limit_remaining: over ? 0 : Math.max(0, Math.floor(d.limit.remaining)),
    duration_until_reset: { seconds: d.limit.resetS },
  }
}

/** The names of the three headers (envoyproxy/ratelimit's LIMIT_LIMIT_HEADER, LIMIT_REMAINING_HEADER, LIMIT_RESET_HEADER). */
export interface RlsHeaderNames {
  limit: string
  remaining: string
  reset: string
}

export const RLS_HEADER_NAMES: Readonly<RlsHeaderNames> = {
  limit: 'RateLimit-Limit',
  remaining: 'RateLimit-Remaining',
  reset: 'RateLimit-Reset',
}

function headers(
  statuses: readonly DescriptorStatus[],
  names: Readonly<RlsHeaderNames>,
  quota: readonly boolean[] | undefined,
): Array<{ key: string; value: string }> | undefined {
  // As envoyproxy/ratelimit: the limited descriptor with the fewest requests left, except that one
  // OVER_LIMIT outside quota_mode (the last such) is taken over one that merely has none left.
  let min: DescriptorStatus | undefined
  for (let i = 0; i < statuses.length; i++) {
    const s = statuses[i]!
    if (!s.current_limit) continue
    if ((s.code === OVER_LIMIT && quota?.[i] !== true) || min === undefined || s.limit_remaining < min.limit_remaining) min = s
  }
  if (min === undefined) return undefined
  return [
    { key: names.limit, value: String(min.current_limit!.requests_per_unit) },
    { key: names.remaining, value: String(min.limit_remaining) },
    { key: names.reset, value: String(min.duration_until_reset?.seconds ?? 0) },
  ]
}

/**
 * The response: OVER_LIMIT overall when a descriptor not in quota_mode is, or when every one in
 * quota_mode (`quota[i]`) is, as envoyproxy/ratelimit; `withHeaders`: FAIRVISOR_RLS_RESPONSE_HEADERS.
 */
export function rateLimitResponse(
  statuses: DescriptorStatus[],
  withHeaders: boolean,
  quota?: readonly boolean[],
  names: Readonly<RlsHeaderNames> = RLS_HEADER_NAMES,
): RateLimitResponse {
  let over = false
  let quotas = 0
  let quotasOver = 0
  for (let i = 0; i < statuses.length; i++) {
    const isOver = statuses[i]!.code === OVER_LIMIT
    if (quota?.[i] === true) {
      quotas++
      if (isOver) quotasOver++
    } else if (isOver) over = true
  }
  const overall = over || (quotas > 0 && quotasOver === quotas) ? OVER_LIMIT : OK
  const res: RateLimitResponse = { overall_code: overall, statuses }
  if (withHeaders) res.response_headers_to_add = headers(statuses, names, quota)
  return res
}
