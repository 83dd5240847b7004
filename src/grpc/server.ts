/**
 * The gRPC listener (FAIRVISOR_GRPC_PORT): ext_authz v3 Check, the Rate
 * Limit Service v3 and grpc.health.v1, on one @grpc/grpc-js server. A request
 * that does not decode or does not make sense is answered INVALID_ARGUMENT;
 * no request can throw out of a handler.
 */
import {
  Server,
  ServerCredentials,
  status as Code,
  type sendUnaryData,
  type ServerUnaryCall,
  type UntypedServiceImplementation,
} from '@grpc/grpc-js'
import type { Decide } from '../http/decide.js'
import type { Logger } from '../observe/logger.js'
import type { FailPolicy, Store } from '../store/store.js'
import { createCheck, type CheckRequest } from './ext-authz.js'
import type { GrpcMetrics } from './metrics.js'
import { service, Undecodable } from './protos.js'
import { createShouldRateLimit, OVER_LIMIT, type RateLimitRequest } from './rls-service.js'
import type { RlsConfig } from './rls-config.js'

export interface GrpcOptions {
  decide: Decide
  exposeReason: boolean
  store: Store
  failPolicy: FailPolicy
  rlsConfig(): RlsConfig
  rlsResponseHeaders: boolean
  /** A bundle is in force: RLS descriptors are also decided by it. */
  bundleLoaded(): boolean
  clock(): number
  metrics: GrpcMetrics
  log: Logger
}

export interface GrpcListener {
  port: number
  shutdown(timeoutMs: number): Promise<void>
}

const CODE_NAMES = Object.fromEntries(
  Object.entries(Code)
    .filter(([, v]) => typeof v === 'number')
    .map(([k, v]) => [v, k]),
) as Record<number, string>

type Handler<Req> = (req: Req, then: (err: Error | null, res?: object) => void) => void

/** A unary handler: undecodable or invalid requests become INVALID_ARGUMENT, an unexpected throw INTERNAL; every call is counted. */
function unary<Req>(method: string, o: GrpcOptions, handle: Handler<Req>) {
  return (call: ServerUnaryCall<Req | Undecodable, object>, callback: sendUnaryData<object>): void => {
    const reply = (code: number, res?: object, details?: string): void => {
      o.metrics.calls.inc({ method, code: CODE_NAMES[code] ?? String(code) })
      if (code === Code.OK) callback(null, res)
      else callback({ code, details })
    }
    const req = call.request
    if (req instanceof Undecodable) return reply(Code.INVALID_ARGUMENT, undefined, `request does not decode: ${req.message}`)
    try {
      handle(req, (err, res) => (err ? reply(Code.INVALID_ARGUMENT, undefined, err.message) : reply(Code.OK, res)))
    } catch (err) {
      o.log.error({ err: { message: (err as Error).message }, method }, 'gRPC handler failed')
      reply(Code.INTERNAL, undefined, 'internal error')
    }
  }
}

export async function startGrpc(o: GrpcOptions, port: number, host: string): Promise<GrpcListener> {
  // channelz (per-call tracing for grpcdebug) costs CPU on every call and nothing here reads it.
  const server = new Server({ 'grpc.enable_channelz': 0 })
  const check = createCheck(o.decide, o.exposeReason)
  server.addService(service('envoy.service.auth.v3.Authorization'), {
    Check: unary<CheckRequest>('envoy.service.auth.v3.Authorization/Check', o, check),
  } as UntypedServiceImplementation)
  const known = (): RlsConfig => o.rlsConfig()
  const shouldRateLimit = createShouldRateLimit({
    store: o.store,
    config: known,
    failPolicy: o.failPolicy,
    clock: o.clock,
    responseHeaders: o.rlsResponseHeaders,
    decide: o.decide,
    bundleLoaded: o.bundleLoaded,
    answered: (domain, overall, storeFailed) =>
      o.metrics.rlsDecisions.inc({
        domain: domain ?? '_unknown',
        code: (storeFailed ? 'store_failed_' : '') + (overall === OVER_LIMIT ? 'over_limit' : 'ok'),
      }),
  })
  server.addService(service('envoy.service.ratelimit.v3.RateLimitService'), {
    ShouldRateLimit: unary<RateLimitRequest>('envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit', o, shouldRateLimit),
  } as UntypedServiceImplementation)
  const SERVICES = new Set(['', 'envoy.service.auth.v3.Authorization', 'envoy.service.ratelimit.v3.RateLimitService'])
  server.addService(service('grpc.health.v1.Health'), {
    Check: unary<{ service?: string }>('grpc.health.v1.Health/Check', o, (req, then) =>
      then(null, { status: SERVICES.has(req.service ?? '') ? 1 : 3 }),
    ),
  } as UntypedServiceImplementation)
  const bound = await new Promise<number>((resolve, reject) =>
    server.bindAsync(`${host.includes(':') ? `[${host}]` : host}:${port}`, ServerCredentials.createInsecure(), (err, p) =>
      err ? reject(err) : resolve(p),
    ),
  )
  return {
    port: bound,
    shutdown: (timeoutMs) =>
      new Promise<void>((resolve) => {
        const force = setTimeout(() => {
          server.forceShutdown()
          resolve()
        }, timeoutMs)
        server.tryShutdown(() => {
          clearTimeout(force)
          resolve()
        })
      }),
  }
}
