/**
 * Decision → response, as data: the status, flat header list and body a
 * transport sends for a decision (docs/behaviour.md §7). The same answer the
 * HTTP paths write (respond.ts), so a front end that is not an HTTP listener
 * (the gRPC ext_authz service) answers exactly as they do. Pure: no I/O.
 */
import type { Decision } from '../engine/evaluate.js'
import { rateLimitHeaders } from '../engine/headers.js'

export interface DecisionResponse {
  status: 200 | 429 | 503
  /** Flat [name, value, …]. */
  headers: string[]
  body: string
}

export interface DecisionResponseOptions {
  /** FAIRVISOR_EXPOSE_REASON: the reason code in the body and X-Fairvisor-Reason. */
  exposeReason: boolean
  /** Headers appended last (debug-session headers). */
  extra?: readonly string[]
}

/**
 * LLM rejects answer in the shape OpenAI clients (and their SDKs' retry
 * logic) understand, whatever the backend.
 */
const LLM_MESSAGES: Partial<Record<string, string>> = {
  prompt_tokens_exceeded: 'The prompt is longer than this API key may send in one request.',
  max_tokens_per_request_exceeded: 'The prompt plus the requested completion exceed the tokens allowed per request.',
  tpm_exceeded: 'Rate limit reached for tokens per minute. Please retry after the time given in Retry-After.',
  tpd_exceeded: 'Rate limit reached for tokens per day. Please retry after the time given in Retry-After.',
}

/** The JSON body of a rejected request. */
export function rejectBody(d: Decision, exposeReason: boolean): string {
  const llm = LLM_MESSAGES[d.reason]
  if (llm !== undefined) return JSON.stringify({ error: { message: llm, type: 'rate_limit_error', code: 'rate_limit_exceeded' } })
  let body = d.status === 429 ? '{"error":"too_many_requests"' : '{"error":"service_unavailable"'
  if (exposeReason) body += `,"reason":${JSON.stringify(d.reason)}`
  if (d.retryAfterS !== undefined) body += `,"retry_after":${d.retryAfterS}`
  return `${body}}`
}

/**
 * Allowed: 200, the RateLimit-* headers of the most restrictive limit and the
 * warning, empty body. Rejected: 429/503 with the JSON body, RateLimit-*,
 * Retry-After and X-Fairvisor-Reason.
 */
export function decisionResponse(d: Decision, o: DecisionResponseOptions): DecisionResponse {
  if (d.allowed) {
    const headers = d.limit === undefined ? [] : rateLimitHeaders(d.limit)
    if (d.warning !== undefined) headers.push('X-Fairvisor-Warning', d.warning)
    if (o.extra) headers.push(...o.extra)
    return { status: 200, headers, body: '' }
  }
  const body = rejectBody(d, o.exposeReason)
  const headers = ['content-type', 'application/json', 'content-length', String(body.length), 'cache-control', 'no-store']
  if (d.limit) headers.push(...rateLimitHeaders(d.limit))
  if (d.retryAfterS !== undefined) headers.push('Retry-After', String(d.retryAfterS))
  if (o.exposeReason) headers.push('X-Fairvisor-Reason', d.reason)
  if (o.extra) headers.push(...o.extra)
  return { status: d.status, headers, body }
}
