/**
 * Decision → HTTP: the headers an allowed request carries to the client, and
 * the 429/503 answer of a rejected one (docs/behaviour.md §7).
 */
import { STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http'
import type { Duplex } from 'node:stream'
import type { Decision } from '../engine/evaluate.js'
import { rateLimitHeaders } from '../engine/headers.js'
import { rejectBody } from '../llm/dialects/index.js'
import { rawHeader, type RequestInput } from '../request/view.js'

/** Headers added to an allowed response (undefined when there are none). */
export function allowHeaders(d: Decision): string[] | undefined {
  if (d.warning === undefined) return d.limit === undefined ? undefined : rateLimitHeaders(d.limit)
  const out = d.limit === undefined ? [] : rateLimitHeaders(d.limit)
  out.push('X-Fairvisor-Warning', d.warning)
  return out
}

/**
 * Runs `go` after the decision's throttle delay (at once without one). The
 * delay is a timer: nothing blocks and no store call is held. A client that
 * goes away meanwhile is not forwarded, and `abandoned` runs (an LLM call's
 * reservation is then given back).
 */
export function afterDelay(d: Decision, res: ServerResponse, go: () => void, abandoned?: () => void): void {
  if (d.delayMs === undefined) return go()
  const cancel = (): void => {
    clearTimeout(timer)
    abandoned?.()
  }
  const timer = setTimeout(() => {
    res.off('close', cancel)
    if (!res.destroyed) go()
    else abandoned?.()
  }, d.delayMs)
  res.once('close', cancel)
}

/**
 * The 429/503 answer. Hot on an attack or a runaway client, so the flat header
 * list and the small JSON body are built by hand (no object, no stringify of
 * one); the body's values are fixed reason codes and integers.
 */
export function sendRejection(res: ServerResponse, d: Decision, exposeReason: boolean, extra?: string[]): void {
  let body: string
  const llm = LLM_MESSAGES[d.reason]
  const never = NEVER_PASSES.has(d.reason)
  if (llm !== undefined) body = rejectBody(res.req?.url, llm)
  else {
    body = d.status === 429 ? '{"error":"too_many_requests"' : '{"error":"service_unavailable"'
    if (exposeReason) body += `,"reason":${JSON.stringify(d.reason)}`
    if (d.retryAfterS !== undefined) body += `,"retry_after":${d.retryAfterS}`
    body += '}'
  }
  const headers = ['content-type', 'application/json', 'content-length', String(Buffer.byteLength(body)), 'cache-control', 'no-store']
  if (d.limit) {
    const rl = rateLimitHeaders(d.limit)
    for (let i = 0; i < rl.length; i++) headers.push(rl[i]!)
  }
  // A request too large for the rule can never pass: the SDKs read x-should-retry before Retry-After.
  if (never) headers.push('x-should-retry', 'false')
  else if (d.retryAfterS !== undefined) headers.push('Retry-After', String(d.retryAfterS))
  if (exposeReason) headers.push('X-Fairvisor-Reason', d.reason)
  if (extra) for (let i = 0; i < extra.length; i++) headers.push(extra[i]!)
  res.writeHead(d.status, headers)
  res.end(body)
}

/**
 * LLM rejects answer in the error shape of the API the path names, which
 * the SDKs (and their retry logic) understand (docs/behaviour.md §5
 * token_bucket_llm): Anthropic's on Messages paths, OpenAI's elsewhere.
 */
const LLM_MESSAGES: Partial<Record<string, string>> = {
  prompt_tokens_exceeded: 'The prompt is longer than this API key may send in one request.',
  max_tokens_per_request_exceeded: 'The prompt plus the requested completion exceed the tokens allowed per request.',
  tpm_exceeded: 'Rate limit reached for tokens per minute. Please retry after the time given in Retry-After.',
  tpd_exceeded: 'Rate limit reached for tokens per day. Please retry after the time given in Retry-After.',
}

/** Rejects no retry can turn into a pass: the request itself is over the rule's per-request limits. */
const NEVER_PASSES = new Set(['prompt_tokens_exceeded', 'max_tokens_per_request_exceeded'])

/** The request a reverse-proxied IncomingMessage is. */
export function inputFromRequest(req: IncomingMessage): RequestInput {
  const url = req.url ?? '/'
  const q = url.indexOf('?')
  return {
    method: req.method ?? 'GET',
    path: q === -1 ? url : url.slice(0, q),
    rawQuery: q === -1 ? '' : url.slice(q + 1),
    // rawHeaders, not req.headers: the latter builds a whole header object on first access.
    host: rawHeader(req.rawHeaders, 'host') ?? '',
    rawHeaders: req.rawHeaders,
    peer: req.socket.remoteAddress ?? '',
  }
}

export function sendJson(res: ServerResponse, status: number, body: object, headers?: string[]): void {
  const text = JSON.stringify(body)
  const flat = ['content-type', 'application/json', 'content-length', String(Buffer.byteLength(text)), 'cache-control', 'no-store']
  if (headers) flat.push(...headers)
  res.writeHead(status, flat)
  res.end(text)
}

/** An HTTP/1.1 response head (status line from http.STATUS_CODES, then a flat [name, value, …] list), for raw sockets. */
export function rawHead(status: number, headers: readonly string[]): string {
  let head = `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Unknown'}\r\n`
  for (let i = 0; i < headers.length; i += 2) head += `${headers[i]}: ${headers[i + 1]}\r\n`
  return `${head}\r\n`
}

/** A whole response on a raw socket, which is then closed: answers given outside a ServerResponse (client errors, upgrades). */
export function endRaw(socket: Duplex, status: number, headers: readonly string[] = [], body = ''): void {
  socket.end(rawHead(status, ['connection', 'close', 'content-length', String(Buffer.byteLength(body)), ...headers]) + body)
}
