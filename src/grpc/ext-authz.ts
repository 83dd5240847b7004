/**
 * Envoy's external authorization, gRPC v3 (`envoy.service.auth.v3.Authorization/Check`):
 * the HTTP request Envoy describes goes through the same decider as a request
 * on the HTTP listener, and the decision is answered as the HTTP paths answer
 * it (decision/response.ts): OK with the RateLimit-* headers for the
 * client, or a denied response carrying the 429/503 status, headers and body.
 */
import type { Context } from '@opentelemetry/api'
import type { Decision } from '../engine/decision.js'
import { InvalidGrpcRequest } from '../errors.js'
import type { Decide } from '../decision/decide.js'
import { decisionResponse } from '../decision/response.js'
import { type EncodedSlashes, readTarget } from '../request/target.js'
import type { RequestInput } from '../request/view.js'

/** google.rpc.Code values used in CheckResponse.status. */
const RPC_OK = 0
const RPC_PERMISSION_DENIED = 7
const RPC_UNAVAILABLE = 14

interface HeaderValue {
  key?: string
  value?: string
  raw_value?: Buffer
}
interface HttpRequest {
  method?: string
  headers?: Record<string, string>
  path?: string
  host?: string
  header_map?: { headers?: HeaderValue[] }
}
export interface CheckRequest {
  attributes?: {
    source?: { address?: { socket_address?: { address?: string } } }
    request?: { http?: HttpRequest }
  }
}

/**
 * CheckRequest → the request the decider takes. Envoy's `path` is the request target (path and
 * query), read as the HTTP listener reads its request line (request/target.ts).
 */
export function inputFromCheck(req: CheckRequest, slashes: EncodedSlashes): RequestInput {
  const http = req.attributes?.request?.http
  if (http === undefined || http === null) throw new InvalidGrpcRequest('attributes.request.http is required')
  const target = http.path || '/'
  if (!target.startsWith('/') && target !== '*')
    throw new InvalidGrpcRequest(`attributes.request.http.path "${target.slice(0, 64)}" is not an origin-form request target`)
  const rawHeaders: string[] = []
  // Envoy sends either the `headers` map or, with encode_raw_headers, `header_map`; pseudo-headers are not HTTP headers here.
  if (http.headers) for (const name in http.headers) if (name[0] !== ':') rawHeaders.push(name, http.headers[name]!)
  if (http.header_map?.headers) {
    for (const h of http.header_map.headers) {
      if (h.key && h.key[0] !== ':') rawHeaders.push(h.key, h.raw_value?.length ? h.raw_value.toString('latin1') : (h.value ?? ''))
    }
  }
  return {
    method: http.method || 'GET',
    ...readTarget(target, http.host || '', slashes),
    host: http.host || '',
    rawHeaders,
    peer: req.attributes?.source?.address?.socket_address?.address ?? '',
  }
}

const option = (headers: readonly string[]): Array<{ header: { key: string; value: string }; append_action: number }> => {
  const out = []
  // OVERWRITE_IF_EXISTS_OR_ADD: the gateway's value replaces one an upstream or earlier filter set.
  for (let i = 0; i < headers.length; i += 2) out.push({ header: { key: headers[i]!, value: headers[i + 1]! }, append_action: 2 })
  return out
}

/** Headers Envoy computes itself on a local reply: sending them would duplicate or contradict its own. */
const HOP = new Set(['content-length'])

/** `path`: the request target Envoy describes (an LLM reject answers in the error shape of the API it names). */
export function checkResponse(d: Decision, exposeReason: boolean, path?: string): object {
  const r = decisionResponse(d, { exposeReason, path })
  if (d.allowed) return { status: { code: RPC_OK }, ok_response: { response_headers_to_add: option(r.headers) } }
  const headers: string[] = []
  for (let i = 0; i < r.headers.length; i += 2) if (!HOP.has(r.headers[i]!)) headers.push(r.headers[i]!, r.headers[i + 1]!)
  return {
    status: { code: r.status === 503 ? RPC_UNAVAILABLE : RPC_PERMISSION_DENIED, message: d.reason },
    denied_response: { status: { code: r.status }, headers: option(headers), body: r.body },
  }
}

/** Check, as a continuation: `then(err, response)`. `slashes`: FAIRVISOR_ENCODED_SLASHES; `trace`: the call's span context when traced. */
export function createCheck(decide: Decide, exposeReason: boolean, slashes: EncodedSlashes) {
  return (
    req: CheckRequest,
    then: (err: InvalidGrpcRequest | null, res?: object) => void,
    gone?: (fn: () => void) => void,
    trace?: Context,
  ): void => {
    let input: RequestInput
    try {
      input = inputFromCheck(req, slashes)
    } catch (err) {
      if (err instanceof InvalidGrpcRequest) return then(err)
      throw err // a bug, not a bad request: the server answers INTERNAL
    }
    if (trace !== undefined) input.trace = trace
    // A delay is held by holding the answer, as the decision API does; a call Envoy cancels meanwhile gives a debt's charges back.
    const answer = (d: Decision): void => then(null, checkResponse(d, exposeReason, input.path))
    decide(input, false, (d) => {
      if (!d.allowed || d.delayMs === undefined) return answer(d)
      const hold = d.hold
      if (hold === undefined) return void setTimeout(answer, d.delayMs, d)
      gone?.(() => hold.abandon())
      hold.then(() => answer(d))
    })
  }
}
