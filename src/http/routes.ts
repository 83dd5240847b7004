/**
 * The listeners' request handling per mode: reverse proxy (decide, then
 * forward or reject; debug-session headers when the client holds a session;
 * upgrades decided like requests) or decision service (`/v1/decision`), plus
 * the admin routes (/livez /readyz /metrics) on the main listener unless
 * they have a listener of their own.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Duplex } from 'node:stream'
import type { Decision } from '../engine/evaluate.js'
import type { Decide } from './decide.js'
import { debugHeaders, type DebugSessions } from './debug-session.js'
import { decisionHandler } from './decision-api.js'
import type { Proxy } from './proxy.js'
import { afterDelay, allowHeaders, endRaw, inputFromRequest, sendJson, sendRejection } from './respond.js'
import type { Handler } from './server.js'

export interface RoutesOptions {
  decide: Decide
  exposeReason: boolean
  debug: DebugSessions
  /** Reverse-proxy mode: the backend; decision-service mode: undefined. */
  proxy: Proxy | undefined
  /** Admin routes to serve on this listener (empty when they have their own). */
  admin: ReadonlyMap<string, Handler>
}

export interface Routes {
  routes: Map<string, Handler>
  fallback: Handler
  upgrade: ((req: IncomingMessage, socket: Duplex, head: Buffer) => void) | undefined
}

export const notFound: Handler = (_req, res) => sendJson(res, 404, { error: 'not_found' })

export function createRoutes({ decide, exposeReason, debug, proxy, admin }: RoutesOptions): Routes {
  // Debug sessions live on the main listener in both modes: the cookie belongs to the clients' host.
  const routes = new Map<string, Handler>([...debug.routes, ...admin])
  if (proxy === undefined) {
    routes.set('/v1/decision', decisionHandler({ decide, exposeReason, debug }))
    return { routes, fallback: notFound, upgrade: undefined }
  }
  const onDecision = (req: IncomingMessage, res: ServerResponse, d: Decision): void => {
    if (d.allowed) afterDelay(d, res, () => proxy.forward(req, res, allowHeaders(d)))
    else sendRejection(res, d, exposeReason)
  }
  const onDebugDecision = (req: IncomingMessage, res: ServerResponse, d: Decision, startNs: bigint): void => {
    const extra = debugHeaders(d, Number((process.hrtime.bigint() - startNs) / 1000n), d.allowed || !exposeReason)
    if (d.allowed) afterDelay(d, res, () => proxy.forward(req, res, [...(allowHeaders(d) ?? []), ...extra]))
    else sendRejection(res, d, exposeReason, extra)
  }
  const fallback: Handler = (req, res) => {
    if (debug.active(req)) {
      const start = process.hrtime.bigint()
      return decide(inputFromRequest(req), true, (d) => onDebugDecision(req, res, d, start))
    }
    decide(inputFromRequest(req), false, (d) => onDecision(req, res, d))
  }
  const upgrade = (req: IncomingMessage, socket: Duplex, head: Buffer): void =>
    decide(inputFromRequest(req), false, (d) => {
      if (d.allowed) proxy.upgrade(req, socket, head)
      else endRaw(socket, d.status, d.retryAfterS ? ['retry-after', String(d.retryAfterS)] : [])
    })
  return { routes, fallback, upgrade }
}
