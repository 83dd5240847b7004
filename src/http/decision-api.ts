/**
 * Decision service (docs/behaviour.md §1): `/v1/decision`, with any method, decides the request
 * that an existing proxy (nginx auth_request, Traefik ForwardAuth, Caddy forward_auth, Envoy's
 * HTTP ext_authz, Kong) describes (http/decision-call.ts), and answers 200 (empty body, RateLimit
 * headers), 429, 400 (an input in conflicting forms) or 503. The proxy forwards the client's own
 * headers (Authorization, limit-key headers, X-Forwarded-For) on the same call.
 *
 * Client address: the socket peer is the calling proxy, so `ip:address` is
 * the peer unless that peer is listed in FAIRVISOR_TRUSTED_PROXIES, in which
 * case the X-Forwarded-For chain it sends is walked as in reverse_proxy mode.
 * X-Real-IP is never believed: one rule for both modes.
 */
import type { ServerResponse } from 'node:http'
import type { Decision } from '../engine/decision.js'
import { AmbiguousRequest } from '../errors.js'
import type { EncodedSlashes } from '../request/target.js'
import type { RequestInput } from '../request/view.js'
import type { Decide } from '../decision/decide.js'
import type { DebugSessions } from './debug-session.js'
import { decisionResponse } from '../decision/response.js'
import { DECISION_PATH, inputFromDecisionCall } from './decision-call.js'
import { afterDelay, writeDecision } from './respond.js'
import type { Handler } from './server.js'
import { serverSpan } from './spans.js'
import { tracer } from '../observe/tracing.js'

export interface DecisionApiOptions {
  decide: Decide
  exposeReason: boolean
  debug: DebugSessions
  /** FAIRVISOR_ENCODED_SLASHES */
  encodedSlashes: EncodedSlashes
  /** This worker thread's id, on its spans (tracing on). */
  worker?: number
}

/** Envoy's HTTP ext_authz `path_prefix` calls: the described path follows (the span's route is this prefix and `*`). */
const PREFIXED = `${DECISION_PATH}/`

/**
 * What every 200 of the decision API carries after the decision's own headers. Not frozen:
 * concatenating onto a frozen array takes V8's slow generic path (≈ 0.3 µs a request).
 */
const ALLOW_FRAMING: readonly string[] = ['content-length', '0', 'cache-control', 'no-store']

function answerAllowed(res: ServerResponse, headers: readonly string[]): void {
  res.writeHead(200, headers as string[])
  res.end()
}

/** The decision's headers (a fresh list: decisionResponse builds one per call) with the framing appended in place. */
function framed(headers: readonly string[]): readonly string[] {
  if (headers.length === 0) return ALLOW_FRAMING
  const out = headers as string[]
  out.push('content-length', '0', 'cache-control', 'no-store')
  return out
}

export function decisionHandler({ decide, exposeReason, debug, encodedSlashes, worker }: DecisionApiOptions): Handler {
  const answer = (res: ServerResponse, input: RequestInput, d: Decision, debugging: boolean, startNs: bigint): void => {
    const debugLatencyUs = debugging ? Number((process.hrtime.bigint() - startNs) / 1000n) : undefined
    // The path of the request the call describes: an LLM reject answers in the error shape of its API.
    const r = decisionResponse(d, { exposeReason, path: input.path, debugLatencyUs })
    if (!d.allowed) return writeDecision(res, r)
    // The answer to the calling proxy is its own HTTP message: framed, and never cached.
    const headers = framed(r.headers)
    if (d.delayMs === undefined) return answerAllowed(res, headers)
    // A throttled request is held by holding the answer: the calling proxy waits for it.
    afterDelay(d, res, () => answerAllowed(res, headers))
  }
  return (req, res) => {
    // Any method: Traefik and Caddy call with GET, Envoy with the client's own method.
    // The body is not used; drain it so the keep-alive connection stays usable.
    req.resume()
    const debugging = debug.active(req)
    const start = debugging ? process.hrtime.bigint() : 0n
    // Tracing on: the call's server span, under the traceparent the calling proxy sent (http/spans.ts).
    const trace = tracer === null ? undefined : serverSpan(req, res, worker, req.url?.startsWith(PREFIXED) ? `${PREFIXED}*` : DECISION_PATH)
    let input: RequestInput
    try {
      input = inputFromDecisionCall(
        { method: req.method, url: req.url, rawHeaders: req.rawHeaders, peer: req.socket.remoteAddress ?? '' },
        encodedSlashes,
      )
    } catch (err) {
      if (!(err instanceof AmbiguousRequest)) throw err
      const d: Decision = {
        allowed: false,
        status: 400,
        reason: 'ambiguous_request',
        mode: 'enforce',
        message: err.message,
        matchedPolicies: [],
      }
      return writeDecision(res, decisionResponse(d, { exposeReason }))
    }
    if (trace !== undefined) input.trace = trace
    decide(input, debugging, (d) => answer(res, input, d, debugging, start))
  }
}
