/**
 * The per-request decision, one function for the proxy, the decision API,
 * gRPC ext_authz and the debug path: verify the bearer token (when a key
 * source is configured), build the RequestView, evaluate against the current
 * bundle, record metrics. A call that names its limits itself (a Rate Limit
 * Service call) is decided by the same engine and recorded the same way.
 */
import type { BlockList } from 'node:net'
import type { Context } from '@opentelemetry/api'
import type { CompiledBundle } from '../bundle/compile.js'
import type { Decision } from '../engine/decision.js'
import type { ChargeRejected, Engine, LimitTarget, NamedLimit } from '../engine/evaluate.js'
import type { Outcomes } from '../store/store.js'
import { bearerToken, type JwtRejectReason, type JwtVerifier } from '../request/jwt-verify.js'
import type { NetworkData } from '../request/network-data.js'
import { rawHeader } from '../request/raw-headers.js'
import { RequestView, type RequestInput } from '../request/view.js'
import type { Holds } from './holds.js'

/**
 * `then` runs once with the decision: at once when nothing waits (in-process
 * store, no token to verify), else when the store or the JWKS answers. A
 * continuation, not a promise: the hot path saves a promise hop per request.
 */
export type Decide = (input: RequestInput, collectDescriptors: boolean, then: (d: Decision) => void) => void

export interface DeciderOptions {
  engine: Engine
  bundle(): CompiledBundle | null
  jwt: JwtVerifier | undefined
  /** Trusted proxies whose X-Forwarded-For is walked (undefined: none). */
  trusted: BlockList | undefined
  /** ASN map, GeoIP databases, Tor exit list. */
  net: NetworkData
  /** Epoch ms. */
  clock(): number
  /** Every decision, with the hrtime it started at (metrics). */
  decided(d: Decision, startNs: bigint): void
  /** A bearer token that did not verify, and why (metrics and a throttled log line). */
  jwtRejected?(reason: JwtRejectReason, detail: string): void
  /** Requests in debt (max_delay_ms) are held here, or refused past FAIRVISOR_MAX_DELAYED; absent: a debt's wait is a plain delay. */
  holds?: Holds
}

export function createDecider(o: DeciderOptions): Decide {
  const holds = o.holds
  const evaluate = (input: RequestInput, collectDescriptors: boolean, start: bigint, then: (d: Decision) => void): void => {
    o.engine.evaluate(o.bundle(), new RequestView(input, o.trusted, o.net), o.clock(), collectDescriptors, (d) => {
      // Held (or refused) before it is recorded: a refusal is counted as the reject it is.
      if (d.debt !== undefined && holds !== undefined) d = holds.hold(d)
      o.decided(d, start)
      then(d)
    })
  }
  const jwt = o.jwt
  return (input, collectDescriptors, then) => {
    const start = process.hrtime.bigint()
    const token = jwt && bearerToken(rawHeader(input.rawHeaders, 'authorization'))
    if (!token) return evaluate(input, collectDescriptors, start, then)
    jwt!.verify(token, o.clock()).then((r) => {
      if (r.claims !== null) return evaluate({ ...input, verifiedClaims: r.claims }, collectDescriptors, start, then)
      o.jwtRejected?.(r.rejected, r.detail)
      // A debug session is told why its token gave no claims; others pay no copy of the decision.
      const answer = collectDescriptors ? (d: Decision) => then({ ...d, jwtRejected: r.rejected }) : then
      evaluate({ ...input, verifiedClaims: null }, collectDescriptors, start, answer)
    })
  }
}

/**
 * The decision on a call that names its limits (Engine.evaluateLimits), with each check's outcome;
 * `charge`: what a group with a reject charges (nothing by default).
 */
export type DecideLimits = (
  target: LimitTarget | undefined,
  limits: readonly NamedLimit[],
  then: (d: Decision, outcomes: Outcomes | undefined, read?: readonly boolean[]) => void,
  charge?: ChargeRejected,
  /** The call's trace context when it is traced (observe/decision-spans.ts puts the decision span in it). */
  trace?: Context,
) => void

export function createLimitDecider(o: Pick<DeciderOptions, 'engine' | 'clock' | 'decided'>): DecideLimits {
  return (target, limits, then, charge, trace) => {
    const start = process.hrtime.bigint()
    o.engine.evaluateLimits(
      target,
      limits,
      o.clock(),
      (d, outcomes, read) => {
        o.decided(d, start)
        then(d, outcomes, read)
      },
      charge,
      trace,
    )
  }
}
