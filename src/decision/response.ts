/**
 * Decision → response, as data: the status, flat header list and body every
 * transport sends for a decision (docs/behaviour.md §7). The reverse proxy,
 * the decision API, the debug path and the gRPC ext_authz service all write
 * what this returns, so they cannot answer differently. Pure: no I/O.
 */
import { LLM_REJECTS, type LlmReject } from '../algorithms/llm-messages.js'
import type { Decision, Reason } from '../engine/decision.js'
import { rateLimitHeaders } from '../engine/headers.js'
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
  let body: string
  const llm = LLM[d.reason]
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
    body =
      d.status === 429 ? '{"error":"too_many_requests"' : d.status === 400 ? '{"error":"bad_request"' : '{"error":"service_unavailable"'
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
