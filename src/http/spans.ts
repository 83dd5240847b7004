/**
 * The spans of the HTTP listener (docs/tracing.md), made only when tracing is on (observe/tracing.ts
 * `tracer`, which the callers check): a server span per request under the client's traceparent,
 * the upstream call's client span (whose context the backend gets in traceparent), the wait of a
 * delayed request. Attribute names are the HTTP semantic conventions'; a query string is never
 * recorded (it may carry credentials).
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import { SpanStatusCode } from '@opentelemetry/api'
import {
  ATTR_ERROR_TYPE,
  ATTR_HTTP_REQUEST_METHOD,
  ATTR_HTTP_RESPONSE_STATUS_CODE,
  ATTR_HTTP_ROUTE,
  ATTR_NETWORK_PEER_ADDRESS,
  ATTR_SERVER_ADDRESS,
  ATTR_SERVER_PORT,
  ATTR_URL_FULL,
  ATTR_URL_PATH,
  ATTR_URL_SCHEME,
  ATTR_USER_AGENT_ORIGINAL,
} from '@opentelemetry/semantic-conventions'
import { rawHeader } from '../request/raw-headers.js'
import {
  ATTR,
  type Context,
  endSpan,
  injectInto,
  parentFromRaw,
  recording,
  type Span,
  SpanKind,
  startSpan,
  under,
} from '../observe/tracing.js'

const pathOnly = (target: string): string => {
  const q = target.indexOf('?')
  return q === -1 ? target : target.slice(0, q)
}

/** The host of a Host header, without its port (server.address). */
function hostOf(host: string): string {
  if (host.startsWith('[')) return host.slice(0, host.indexOf(']') + 1)
  const colon = host.lastIndexOf(':')
  return colon === -1 ? host : host.slice(0, colon)
}

/**
 * A request's server span, under the trace context its client sent (W3C traceparent / tracestate; a
 * new trace without one), ended when its response is (5xx, or a client gone first, is an error).
 * `route`: the path template when there is one (the decision API's; a proxied path has none).
 * Returns the context its decision and upstream call go under.
 */
export function serverSpan(req: IncomingMessage, res: ServerResponse, worker: number | undefined, route?: string): Context {
  const parent = parentFromRaw(req.rawHeaders)
  const method = req.method ?? 'GET'
  const span = startSpan(route === undefined ? method : `${method} ${route}`, SpanKind.SERVER, parent)
  // A request not sampled carries its trace on and nothing more: no attribute is read for it.
  if (!span.isRecording()) return under(parent, span)
  span.setAttributes({
    [ATTR_HTTP_REQUEST_METHOD]: method,
    [ATTR_URL_PATH]: pathOnly(req.url ?? '/'),
    [ATTR_URL_SCHEME]: 'http',
    [ATTR_NETWORK_PEER_ADDRESS]: req.socket.remoteAddress ?? '',
  })
  const host = rawHeader(req.rawHeaders, 'host')
  if (host !== undefined) span.setAttribute(ATTR_SERVER_ADDRESS, hostOf(host))
  const ua = rawHeader(req.rawHeaders, 'user-agent')
  if (ua !== undefined) span.setAttribute(ATTR_USER_AGENT_ORIGINAL, ua)
  if (worker !== undefined) span.setAttribute(ATTR.worker, worker)
  if (route !== undefined) span.setAttribute(ATTR_HTTP_ROUTE, route)
  res.once('close', () => {
    if (!res.writableFinished) return endSpan(span, null, 'client_closed')
    span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, res.statusCode)
    endSpan(span, null, res.statusCode >= 500 ? String(res.statusCode) : undefined)
  })
  return under(parent, span)
}

/**
 * The upstream call's client span, under the request's server span; `headers` (the upstream request's
 * flat list) get its trace context in place of any the client sent, so the backend's spans go under it.
 * A request not sampled makes none: the backend gets its trace as the server span carries it.
 */
export function upstreamSpan(parent: Context, method: string, origin: URL, target: string, headers: string[]): Span | undefined {
  if (!recording(parent)) return void injectInto(parent, headers)
  const port = origin.port === '' ? (origin.protocol === 'https:' ? 443 : 80) : Number(origin.port)
  const span = startSpan(method, SpanKind.CLIENT, parent, {
    [ATTR_HTTP_REQUEST_METHOD]: method,
    [ATTR_SERVER_ADDRESS]: origin.hostname,
    [ATTR_SERVER_PORT]: port,
    [ATTR_URL_FULL]: origin.origin + pathOnly(target),
  })
  injectInto(under(parent, span), headers)
  return span
}

/** The upstream's status, once its response head came; a client span takes a 4xx or 5xx for an error (HTTP semantic conventions). */
export function upstreamStatus(span: Span, status: number): void {
  span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, status)
  if (status >= 400) {
    span.setAttribute(ATTR_ERROR_TYPE, String(status))
    span.setStatus({ code: SpanStatusCode.ERROR })
  }
}

/** The upstream call ended: its body whole (`err` null), or broken. */
export function upstreamEnd(span: Span, err: (Error & { code?: unknown }) | null): void {
  endSpan(span, err)
}

/** The wait of a delayed request (a throttle, a token bucket's debt) before it is forwarded; `end()` when it is over or abandoned. */
export function delaySpan(parent: Context, delayMs: number): Span | undefined {
  if (!recording(parent)) return undefined
  return startSpan('fairvisor.delay', SpanKind.INTERNAL, parent, { [ATTR.delayMs]: delayMs })
}
