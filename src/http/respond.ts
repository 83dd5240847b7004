/**
 * Decision → HTTP: the headers an allowed request carries to the client, and
 * the 429/503 answer of a rejected one (SPEC §7).
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Decision } from '../engine/evaluate.js'
import { rateLimitHeaders } from '../engine/headers.js'
import type { RequestInput } from '../request/view.js'
import { sendJson } from './proxy.js'

/** Headers added to an allowed response (undefined when there are none). */
export function allowHeaders(d: Decision): string[] | undefined {
  return d.limit === undefined ? undefined : rateLimitHeaders(d.limit)
}

export function sendRejection(res: ServerResponse, d: Decision, exposeReason: boolean, extra?: string[]): void {
  const headers = d.limit ? rateLimitHeaders(d.limit) : []
  if (d.retryAfterS !== undefined) headers.push('Retry-After', String(d.retryAfterS))
  if (exposeReason) headers.push('X-Fairvisor-Reason', d.reason)
  if (extra) headers.push(...extra)
  const body: Record<string, unknown> = { error: d.status === 429 ? 'too_many_requests' : 'service_unavailable' }
  if (exposeReason) body.reason = d.reason
  if (d.retryAfterS !== undefined) body.retry_after = d.retryAfterS
  sendJson(res, d.status, body, headers)
}

/** The request a reverse-proxied IncomingMessage is. */
export function inputFromRequest(req: IncomingMessage): RequestInput {
  const url = req.url ?? '/'
  const q = url.indexOf('?')
  return {
    method: req.method ?? 'GET',
    path: q === -1 ? url : url.slice(0, q),
    rawQuery: q === -1 ? '' : url.slice(q + 1),
    host: req.headers.host ?? '',
    rawHeaders: req.rawHeaders,
    peer: req.socket.remoteAddress ?? '',
  }
}
