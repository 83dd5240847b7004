/**
 * A gRPC call's server span (docs/tracing.md), made only when tracing is on (observe/tracing.ts
 * `tracer`, which grpc/server.ts checks): under the traceparent of the call itself (Envoy's tracer
 * sets one on its ext_authz and rate limit calls, its own span the parent) or, for ext_authz, of
 * the HTTP request the CheckRequest describes (attributes.request.http.headers, the client's own).
 * Attribute names are the RPC semantic conventions'.
 */
import type { IncomingHttpHeaders } from 'node:http2'
import { ROOT_CONTEXT } from '@opentelemetry/api'
import { ATTR_RPC_METHOD, ATTR_RPC_STATUS_CODE, ATTR_RPC_SYSTEM_NAME } from '@opentelemetry/semantic-conventions'
import { ATTR, type Context, endSpan, parentFromRecord, SpanKind, startSpan, under } from '../observe/tracing.js'
import type { CheckRequest } from './ext-authz.js'
import { GrpcStatus, statusName } from './status.js'

/** Codes a server's span takes for an error (the gRPC semantic conventions': the server's fault, not the caller's). */
const SERVER_ERRORS: ReadonlySet<number> = new Set([
  GrpcStatus.UNKNOWN,
  GrpcStatus.DEADLINE_EXCEEDED,
  GrpcStatus.UNIMPLEMENTED,
  GrpcStatus.INTERNAL,
  GrpcStatus.UNAVAILABLE,
  GrpcStatus.DATA_LOSS,
])

export interface RpcSpan {
  /** What the call's decisions go under. */
  ctx: Context
  /** The call is answered with `code` (or ended without an answer: CANCELLED). Once. */
  end(code: number): void
}

/** The header lines of the HTTP request a CheckRequest describes (its `headers` map, or `header_map` with encode_raw_headers). */
export function describedHeaders(req: CheckRequest): Record<string, string> | undefined {
  const http = req.attributes?.request?.http
  if (http?.headers) return http.headers
  const list = http?.header_map?.headers
  if (list === undefined) return undefined
  const out: Record<string, string> = {}
  for (const h of list) if (h.key) out[h.key.toLowerCase()] = h.raw_value?.length ? h.raw_value.toString('latin1') : (h.value ?? '')
  return out
}

/**
 * The span of a call to `method` (its path, `/package.Service/Method`); `headers`: the call's, whose
 * traceparent wins; `described`: the described request's headers (ext_authz), read when the call has none.
 */
export function rpcSpan(
  method: string,
  headers: IncomingHttpHeaders,
  described: Record<string, string> | undefined,
  worker?: number,
): RpcSpan {
  const parent = parentFromRecord(headers) ?? parentFromRecord(described) ?? ROOT_CONTEXT
  const name = method.slice(1)
  const span = startSpan(name, SpanKind.SERVER, parent)
  if (span.isRecording()) {
    span.setAttributes({ [ATTR_RPC_SYSTEM_NAME]: 'grpc', [ATTR_RPC_METHOD]: name })
    if (worker !== undefined) span.setAttribute(ATTR.worker, worker)
  }
  let ended = false
  return {
    ctx: under(parent, span),
    end(code) {
      if (ended) return
      ended = true
      span.setAttribute(ATTR_RPC_STATUS_CODE, statusName(code))
      endSpan(span, null, SERVER_ERRORS.has(code) ? statusName(code) : undefined)
    },
  }
}
