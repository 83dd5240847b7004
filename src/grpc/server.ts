/**
 * The gRPC listener (FAIRVISOR_GRPC_PORT): ext_authz v3 Check, the Rate
 * Limit Service v3 and grpc.health.v1 Check, on the unary server of
 * unary-server.ts. A request that does not decode or does not make sense is
 * answered INVALID_ARGUMENT; no request can throw out of a handler.
 */
import type { Decide, DecideLimits } from '../decision/decide.js'
import { OVER_LIMIT, UNKNOWN, type RlsHeaderNames } from '../decision/rls-answer.js'
import type { EncodedSlashes } from '../request/target.js'
import type { Logger } from '../observe/logger.js'
import type { ByteBudget } from './byte-budget.js'
import { createCheck, type CheckRequest } from './ext-authz.js'
import type { GrpcMetrics } from './metrics.js'
import { method } from './protos.js'
import { descriptorCap } from './rls-cap.js'
import { createShouldRateLimit, StoreFailure, type RateLimitRequest } from './rls-service.js'
import type { RlsConfig } from './rls-config.js'
import type { RlsStats } from './rls-stats.js'
import { GrpcStatus } from './status.js'
import { createUnaryServer, type UnaryMethod, type UnaryServer } from './unary-server.js'
import { GrpcFailure } from './wire.js'
import { describedHeaders, rpcSpan } from './spans.js'
import { tracer, type Context } from '../observe/tracing.js'

export interface GrpcOptions {
  decide: Decide
  exposeReason: boolean
  /** FAIRVISOR_ENCODED_SLASHES: how ext_authz reads the paths Envoy describes. */
  encodedSlashes: EncodedSlashes
  /** The engine, for the RLS configuration's limits (the bundle's are decided through `decide`). */
  decideLimits: DecideLimits
  /** undefined: FAIRVISOR_RLS_CONFIG is set but no configuration has loaded yet (calls are answered an error). */
  rlsConfig(): RlsConfig | undefined
  rlsResponseHeaders: boolean
  rlsHeaderNames?: Readonly<RlsHeaderNames>
  /** The decider charges every descriptor of a rejected call (FAIRVISOR_RLS_STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT off). */
  rlsChargeRejected: boolean
  /** FAIRVISOR_RLS_STORE_FAILURE: a call whose store failed is answered an error (UNKNOWN) or the fail policy's statuses. */
  rlsStoreFailure: 'error' | 'policy'
  /** FAIRVISOR_RLS_MAX_DESCRIPTORS: a ShouldRateLimit call with more is refused before it is decoded. */
  rlsMaxDescriptors: number
  /** FAIRVISOR_RLS_SHADOW_MODE, FAIRVISOR_RLS_QUOTA_MODE, FAIRVISOR_RLS_RESPONSE_DYNAMIC_METADATA (envoyproxy/ratelimit's global switches). */
  rlsShadowMode?: boolean
  rlsQuotaMode?: boolean
  rlsDynamicMetadata?: boolean
  /** A bundle is in force: RLS descriptors are also decided by it. */
  bundleLoaded(): boolean
  metrics: GrpcMetrics
  /** envoyproxy/ratelimit's statistics of this thread (grpc/rls-stats.ts). */
  rlsStats?: RlsStats
  log: Logger
  /** PEM certificate and key (and a CA that client certificates must chain to): the listener speaks TLS. */
  tls?: { cert: Buffer; key: Buffer; ca?: Buffer }
  maxConcurrentStreams: number
  /** FAIRVISOR_GRPC_MAX_BUFFERED_BYTES, shared by the process's threads. */
  budget: ByteBudget
  /** FAIRVISOR_GRPC_IDLE_TIMEOUT_MS and FAIRVISOR_GRPC_STREAM_TIMEOUT_MS. */
  idleTimeoutMs: number
  streamTimeoutMs: number
  /** This worker thread's id, on its spans (tracing on). */
  worker?: number
}

/**
 * `gone(fn)`: `fn` runs if the call ends before it is answered (the caller cancelled it, its deadline passed);
 * `trace`: the call's server span context when it is traced (its decisions go under it).
 */
type Handler<Req> = (
  req: Req,
  then: (err: Error | GrpcFailure | null, res?: object) => void,
  gone: (fn: () => void) => void,
  trace?: Context,
) => void

interface UnaryExtras<Req> {
  /** Answers from the bytes before they are decoded (the Rate Limit Service's descriptor cap). */
  refuse?: UnaryMethod['refuse']
  failed?: (f: GrpcFailure) => void
  /** Tracing: the headers of the request a call describes (ext_authz), whose traceparent is read when the call has none. */
  described?: (req: Req) => Record<string, string> | undefined
  worker?: number
}

/**
 * A service handler as a unary method: its `then(err)` (a request that makes no sense) becomes INVALID_ARGUMENT.
 * With tracing on, each call is a server span (grpc/spans.ts) ended with its answer.
 */
function unary<Req>(service: string, name: string, handle: Handler<Req>, x: UnaryExtras<Req> = {}): [string, UnaryMethod] {
  const codec = method(service, name)
  const fail = (err: Error | GrpcFailure): GrpcFailure => {
    const f = err instanceof GrpcFailure ? err : new GrpcFailure(GrpcStatus.INVALID_ARGUMENT, err.message)
    x.failed?.(f)
    return f
  }
  return [
    codec.path,
    {
      refuse: x.refuse,
      decode: codec.decode,
      encode: codec.encode,
      handle: (req, answer, gone, headers) => {
        if (tracer === null) return handle(req as Req, (err, res) => answer(err ? fail(err) : res!), gone)
        const span = rpcSpan(codec.path, headers, x.described?.(req as Req), x.worker)
        gone(() => span.end(GrpcStatus.CANCELLED))
        const reply = (err: Error | GrpcFailure | null, res?: object): void => {
          const out = err ? fail(err) : res!
          span.end(out instanceof GrpcFailure ? out.code : GrpcStatus.OK)
          answer(out)
        }
        handle(req as Req, reply, gone, span.ctx)
      },
    },
  ]
}

// `ratelimit` is the name envoyproxy/ratelimit serves its health under: probes written for it keep working.
/** As envoyproxy/ratelimit answers (UNKNOWN) while no configuration has loaded: not OK to everything, Envoy's failure_mode_deny decides. */
const NO_CONFIG = new GrpcFailure(GrpcStatus.UNKNOWN, 'no rate limit configuration loaded')
const EMPTY: RlsConfig = new Map()

const SERVICES = new Set(['', 'envoy.service.auth.v3.Authorization', 'envoy.service.ratelimit.v3.RateLimitService', 'ratelimit'])

/** The listener's server, not listening yet: the runtime listens on its socket (runtime/runtime.ts). */
export function createGrpc(o: GrpcOptions): UnaryServer {
  const stats = o.rlsStats
  const shouldRateLimit = createShouldRateLimit({
    config: () => o.rlsConfig() ?? EMPTY,
    decideLimits: o.decideLimits,
    responseHeaders: o.rlsResponseHeaders,
    headerNames: o.rlsHeaderNames,
    chargeRejected: o.rlsChargeRejected,
    storeFailure: o.rlsStoreFailure,
    shadowMode: o.rlsShadowMode,
    quotaMode: o.rlsQuotaMode,
    dynamicMetadata: o.rlsDynamicMetadata,
    decide: o.decide,
    bundleLoaded: o.bundleLoaded,
    answered: (domain, overall, storeFailed) => {
      o.metrics.rlsDecisions.inc({
        domain: domain ?? '_unknown',
        code: overall === UNKNOWN ? 'store_error' : (storeFailed ? 'store_failed_' : '') + (overall === OVER_LIMIT ? 'over_limit' : 'ok'),
      })
      if (storeFailed) stats?.count('redis_error')
    },
    counted: stats && ((name, domain, entries, p, after) => stats.hit(name, domain, entries, p, after)),
  })
  const methods = new Map([
    unary<CheckRequest>('envoy.service.auth.v3.Authorization', 'Check', createCheck(o.decide, o.exposeReason, o.encodedSlashes), {
      described: describedHeaders,
      worker: o.worker,
    }),
    unary<RateLimitRequest>(
      'envoy.service.ratelimit.v3.RateLimitService',
      'ShouldRateLimit',
      (req, then, _gone, trace) => (o.rlsConfig() === undefined ? then(NO_CONFIG) : shouldRateLimit(req, then, trace)),
      {
        refuse: descriptorCap(o.rlsMaxDescriptors, () => o.metrics.rlsTooManyDescriptors.inc()),
        // envoyproxy/ratelimit's call errors: a call it refuses (no configuration, a bad request); its store failing is
        // counted by `answered` (a StoreFailure is that answer).
        failed: stats && ((f) => (f instanceof StoreFailure ? undefined : stats.count('service_error'))),
        worker: o.worker,
      },
    ),
    unary<{ service?: string }>('grpc.health.v1.Health', 'Check', (req, then) =>
      then(null, { status: SERVICES.has(req.service ?? '') ? 1 : 3 }),
    ),
  ])
  // One prom-client child per (method, code): a labelled inc() hashes its labels on every call.
  const counters = new Map<string, { inc(): void }>()
  return createUnaryServer({
    methods,
    tls: o.tls,
    maxConcurrentStreams: o.maxConcurrentStreams,
    budget: o.budget,
    idleTimeoutMs: o.idleTimeoutMs,
    streamTimeoutMs: o.streamTimeoutMs,
    counted: (m, code) => {
      const key = `${m} ${code}`
      let c = counters.get(key)
      if (c === undefined) counters.set(key, (c = o.metrics.calls.labels(m || '_unknown', code)))
      c.inc()
    },
    failed: (m, err) => o.log.error({ err: { message: (err as Error).message }, method: m }, 'gRPC handler failed'),
  })
}
