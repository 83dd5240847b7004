/**
 * Decision → response, as data: the status, flat header list and body every
 * transport sends for a decision (docs/behaviour.md §7). The reverse proxy,
 * the decision API, the debug path and the gRPC ext_authz service all write
 * what this returns, so they cannot answer differently. Pure: no I/O.
 */
import { LLM_REJECTS, type LlmReject } from '../algorithms/llm-messages.js'
import type { Decision, Reason } from '../engine/decision.js'
import { type LimitView, rateLimitHeaders, sfInteger, sfString } from '../engine/headers.js'
import { bedrockErrorType } from '../llm/dialects/bedrock.js'
import { apiOfPath, rejectBody } from '../llm/dialects/index.js'
import { debugHeaders } from './debug-headers.js'

export interface DecisionResponse {
  status: 200 | 400 | 403 | 429 | 503
  /**
   * Flat [name, value, …]; for an allowed request, the headers added to the upstream's response.
   * A new list on every call (a transport may append its framing in place), except the shared
   * empty one of a bare allow.
   */
  headers: readonly string[]
  body: string
}

export interface DecisionResponseOptions {
  /** FAIRVISOR_EXPOSE_REASON: the reason code in the body and X-Fairvisor-Reason. */
  exposeReason: boolean
  /** The request target (path, query allowed): an LLM reject answers in the error shape of the API it names. */
  path?: string
  /** Set for a client holding a debug session: the decision's latency, and the X-Fairvisor-Debug-* headers are added. */
  debugLatencyUs?: number
}

/** An allowed request with no limit to report and no debug session: nothing to add (no allocation on the hot path). */
const ALLOW_BARE: DecisionResponse = Object.freeze({ status: 200, headers: Object.freeze([]), body: '' })

/** The LLM algorithm's rejects (message, whether a retry can pass), looked up by any decision's reason. */
const LLM = LLM_REJECTS as Readonly<Partial<Record<Reason, LlmReject>>>

/**
 * What the answers of one rejecting limit share, built once: a plain reject (JSON body, the
 * limit's RateLimit-* headers, Retry-After) differs from the one before only in three integers
 * (remaining, reset, retry after). Checked against the decision on each use, so a reloaded bundle
 * with other figures for the same policy gets a new one.
 */
interface RejectTemplate {
  status: number
  exposeReason: boolean
  limit: number
  windowS: number
  /** The policy id as an sf-string. */
  id: string
  /** RateLimit-Limit and RateLimit-Policy. */
  limitValue: string
  policyValue: string
  /** The body up to its retry_after (ASCII: error and reason codes). */
  bodyHead: string
}

/** By reject reason, then policy id: both fixed strings from the bundle and the algorithms, so their hashes are kept. */
const templates = new Map<string, Map<string, RejectTemplate>>()
/** Policy ids come from bundles: a process that reloads many bundles starts the table over past this many. */
const MAX_TEMPLATES = 10_000
let templateCount = 0

function errorHead(status: number): string {
  return status === 429 ? '{"error":"too_many_requests"' : status === 400 ? '{"error":"bad_request"' : '{"error":"service_unavailable"'
}

function templateOf(d: Decision, l: LimitView, exposeReason: boolean): RejectTemplate {
  let byPolicy = templates.get(d.reason)
  if (byPolicy === undefined) templates.set(d.reason, (byPolicy = new Map()))
  const t = byPolicy.get(l.policyId)
  if (t !== undefined && t.status === d.status && t.exposeReason === exposeReason && t.limit === l.limit && t.windowS === l.windowS)
    return t
  if (++templateCount > MAX_TEMPLATES) {
    templates.clear()
    templates.set(d.reason, byPolicy)
    byPolicy.clear()
    templateCount = 1
  }
  const id = sfString(l.policyId)
  const limitValue = sfInteger(l.limit)
  const made: RejectTemplate = {
    status: d.status,
    exposeReason,
    limit: l.limit,
    windowS: l.windowS,
    id,
    limitValue,
    policyValue: `${id};q=${limitValue};w=${sfInteger(l.windowS)}`,
    bodyHead: errorHead(d.status) + (exposeReason ? `,"reason":${JSON.stringify(d.reason)}` : ''),
  }
  byPolicy.set(l.policyId, made)
  return made
}

/**
 * A plain reject by a limit that reports its figures (every token bucket, budget and window
 * reject): its template's strings and the three integers, one header list of the final length.
 * The same bytes as the general path below, in the same order.
 */
function limitReject(d: Decision, l: LimitView, retryAfterS: number, exposeReason: boolean): DecisionResponse {
  const t = templateOf(d, l, exposeReason)
  const remaining = sfInteger(l.remaining)
  const reset = sfInteger(l.resetS)
  const body = `${t.bodyHead},"retry_after":${retryAfterS}}`
  const length = String(body.length)
  const rateLimit = `${t.id};r=${remaining};t=${reset}`
  const headers = exposeReason
    ? [
        'content-type',
        'application/json',
        'content-length',
        length,
        'cache-control',
        'no-store',
        'RateLimit-Limit',
        t.limitValue,
        'RateLimit-Remaining',
        remaining,
        'RateLimit-Reset',
        reset,
        'RateLimit',
        rateLimit,
        'RateLimit-Policy',
        t.policyValue,
        'Retry-After',
        String(retryAfterS),
        'X-Fairvisor-Reason',
        d.reason,
      ]
    : [
        'content-type',
        'application/json',
        'content-length',
        length,
        'cache-control',
        'no-store',
        'RateLimit-Limit',
        t.limitValue,
        'RateLimit-Remaining',
        remaining,
        'RateLimit-Reset',
        reset,
        'RateLimit',
        rateLimit,
        'RateLimit-Policy',
        t.policyValue,
        'Retry-After',
        String(retryAfterS),
      ]
  return { status: d.status, headers, body }
}

/**
 * Allowed: 200, the RateLimit-* headers of the most restrictive limit and the
 * warning, empty body. Rejected: 400/403/429/503 with the JSON body, RateLimit-*,
 * Retry-After, `x-should-retry: false` on an LLM reject no client should
 * retry (its 400s and 403s: docs/llm.md "Rejects that end") and
 * X-Fairvisor-Reason. Hot on an attack or a runaway client, so the flat
 * header list and the small JSON body are built by hand; the body's values
 * are fixed reason codes and integers.
 */
export function decisionResponse(d: Decision, o: DecisionResponseOptions): DecisionResponse {
  const debug = o.debugLatencyUs === undefined ? undefined : debugHeaders(d, o.debugLatencyUs, d.allowed || !o.exposeReason)
  if (d.allowed) {
    if (d.limit === undefined && d.warning === undefined && debug === undefined) return ALLOW_BARE
    const headers = d.limit === undefined ? [] : rateLimitHeaders(d.limit)
    if (d.warning !== undefined) headers.push('X-Fairvisor-Warning', d.warning)
    if (debug !== undefined) for (let i = 0; i < debug.length; i++) headers.push(debug[i]!)
    return { status: 200, headers, body: '' }
  }
  const llm = LLM[d.reason]
  // The common reject (an attack, a runaway client): built from its limit's template.
  if (llm === undefined && d.message === undefined && debug === undefined && d.limit !== undefined && d.retryAfterS !== undefined)
    return limitReject(d, d.limit, d.retryAfterS, o.exposeReason)
  let body: string
  const api = o.path === undefined ? undefined : apiOfPath(o.path)
  // 403: an LLM reject (a token counter's or a money budget's) that cannot pass within FAIRVISOR_LLM_MAX_RETRY_AFTER.
  const ended = d.status === 403
  let invalid = false
  if (llm !== undefined) {
    invalid = llm.tooLarge
    body = rejectBody(o.path, d.message ?? llm.message, invalid, invalid ? d.reason : undefined, ended)
  }
  // An LLM SDK shows the message of an error in its API's shape.
  else if (d.message !== undefined && api !== undefined) {
    invalid = !ended
    body = rejectBody(o.path, d.message, invalid, undefined, ended)
  } else {
    body = ended ? '{"error":"forbidden"' : errorHead(d.status)
    if (o.exposeReason) body += `,"reason":${JSON.stringify(d.reason)}`
    if (d.message !== undefined) body += `,"message":${JSON.stringify(d.message)}`
    if (d.retryAfterS !== undefined) body += `,"retry_after":${d.retryAfterS}`
    body += '}'
  }
  const headers = ['content-type', 'application/json', 'content-length', String(Buffer.byteLength(body)), 'cache-control', 'no-store']
  if (d.limit) {
    const rl = rateLimitHeaders(d.limit)
    for (let i = 0; i < rl.length; i++) headers.push(rl[i]!)
  }
  // The OpenAI and Anthropic SDKs (and the Agents SDK) read x-should-retry before the status; Retry-After still
  // says when a 403's request could pass.
  if ((llm !== undefined && d.status !== 429) || ended) headers.push('x-should-retry', 'false')
  // The AWS SDK reads a Bedrock error's type from this header first.
  if (api === 'bedrock' && (llm !== undefined || invalid || ended))
    headers.push('x-amzn-ErrorType', bedrockErrorType(invalid ? 'invalid' : d.status === 403 ? 'ended' : 'limit'))
  if (d.retryAfterS !== undefined) headers.push('Retry-After', String(d.retryAfterS))
  if (o.exposeReason) headers.push('X-Fairvisor-Reason', d.reason)
  if (debug !== undefined) for (let i = 0; i < debug.length; i++) headers.push(debug[i]!)
  return { status: d.status, headers, body }
}
