/**
 * The listeners' request handling per mode: reverse proxy (decide, then
 * forward or reject, holding a request's concurrency slots until its response
 * or upgraded socket closes; debug-session headers when the client holds a session;
 * upgrades decided like requests) or decision service (`/v1/decision`, and
 * `/v1/decision/<path>` for Envoy's HTTP ext_authz `path_prefix`), plus
 * the admin routes (/livez /readyz /metrics) on the main listener unless
 * they have a listener of their own.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Duplex } from 'node:stream'
import type { CompiledBundle } from '../bundle/compile.js'
import type { Decision, LlmReservation, SpendReservation } from '../engine/decision.js'
import type { SettleStatus } from '../engine/status-charges.js'
import type { LlmExchange } from '../llm/exchange.js'
import { forwardTarget, type PathSettings } from '../request/target.js'
import type { RequestInput } from '../request/view.js'
import type { Decide } from '../decision/decide.js'
import type { DebugSessions } from './debug-session.js'
import { decisionResponse } from '../decision/response.js'
import { decisionHandler } from './decision-api.js'
import { DECISION_PATH } from './decision-call.js'
import { withStreamUsage } from '../llm/stream-usage.js'
import { bodyBudget, readHead, rejectHeld } from './llm-body.js'
import type { HeldBody, Proxy as ReverseProxy } from './proxy.js'
import type { SlotHolds } from './slot-holds.js'
import { afterDelay, endRaw, inputFromRequest, sendJson, writeDecision } from './respond.js'
import type { LaneExchange } from './lane-exchange.js'
import type { LaneRoutes } from './lane.js'
import { type Handler, pathOf } from './server.js'
import { delaySpan, serverSpan } from './spans.js'
import { tracer, type Context } from '../observe/tracing.js'

export interface RoutesOptions {
  decide: Decide
  exposeReason: boolean
  debug: DebugSessions
  /** Reverse-proxy mode: the backend; decision-service mode: undefined. */
  proxy: ReverseProxy | undefined
  /** Admin routes to serve on this listener (empty when they have their own). */
  admin: ReadonlyMap<string, Handler>
  /** How request targets are read (FAIRVISOR_ENCODED_SLASHES) and which path is forwarded (FAIRVISOR_FORWARD_PATH). */
  paths: PathSettings
  /**
   * LLM rules: the bundle (does a request need its body read?), the settlement of an allowed call, and
   * FAIRVISOR_LLM_STREAM_USAGE (ask OpenAI-compatible streams for their usage: llm/stream-usage.ts).
   */
  llm?: {
    bundle(): CompiledBundle | null
    exchange(reservations: LlmReservation[], spend?: SpendReservation[], trace?: Context): LlmExchange
    streamUsage?: boolean
  }
  /** Rules with count_statuses / refund_statuses: their charges settled once the response's status is known. */
  settleStatus?: SettleStatus
  /** This worker thread's id, on its spans (tracing on). */
  worker?: number
  /** Concurrency slots of forwarded requests, given back when each exchange ends. */
  slots?: SlotHolds
}

export interface Routes {
  routes: Map<string, Handler>
  fallback: Handler
  upgrade: ((req: IncomingMessage, socket: Duplex, head: Buffer) => void) | undefined
  /** Reverse proxy to a plain-HTTP backend: the requests the client lane (lane.ts) serves itself. */
  lane?: LaneRoutes
}

export const notFound: Handler = (_req, res) => sendJson(res, 404, { error: 'not_found' })

export function createRoutes({
  decide,
  exposeReason,
  debug,
  proxy,
  admin,
  paths,
  llm,
  settleStatus,
  worker,
  slots,
}: RoutesOptions): Routes {
  // Debug sessions live on the main listener in both modes: the cookie belongs to the clients' host.
  const routes = new Map<string, Handler>([...debug.routes, ...admin])
  if (proxy === undefined) {
    const decision = decisionHandler({ decide, exposeReason, debug, encodedSlashes: paths.encodedSlashes, worker })
    routes.set(DECISION_PATH, decision)
    const prefixed = `${DECISION_PATH}/`
    const fallback: Handler = (req, res) => ((req.url ?? '').startsWith(prefixed) ? decision(req, res) : notFound(req, res))
    return { routes, fallback, upgrade: undefined }
  }
  /** The LLM exchange of an allowed call; a rejected one gives back what its shadow rules charged. */
  const tapOf = (d: Decision, trace: Context | undefined): LlmExchange | undefined => {
    if ((d.llm === undefined && d.spend === undefined) || llm === undefined) return undefined
    const x = llm.exchange(d.llm ?? [], d.spend, trace)
    if (d.allowed) return x
    x.end(false)
    return undefined
  }
  /** The after-response hook of an allowed request whose rules settle on the status (count_statuses / refund_statuses). */
  const statusHookOf = (d: Decision): ((status: number) => void) | undefined => {
    const charges = d.statusCharges
    if (charges === undefined || settleStatus === undefined) return undefined
    return (status) => settleStatus(charges, status)
  }
  /** Forward or reject as `decisionResponse` says; `debugLatencyUs` set for a client holding a debug session. */
  const onDecision = (
    req: IncomingMessage,
    res: ServerResponse,
    input: RequestInput,
    d: Decision,
    held: HeldBody | undefined,
    debugLatencyUs?: number,
  ): void => {
    const r = decisionResponse(d, { exposeReason, path: input.path, debugLatencyUs })
    const trace = input.trace
    slots?.holdUntilClosed(d, res)
    const tap = tapOf(d, trace)
    if (!d.allowed) {
      // Nothing held (no LLM rule matched): written at once, no closure for a body to wait for.
      if (held === undefined) return writeDecision(res, r)
      return rejectHeld(req, res, held, () => writeDecision(res, r))
    }
    if (tap !== undefined && held !== undefined && llm?.streamUsage === true) {
      const asked = withStreamUsage(held.held, held.ended, input.path)
      if (asked !== undefined) {
        held = { held: asked, spill: undefined, ended: true }
        tap.hideUsageChunk()
      }
    }
    const extra = r.headers.length === 0 ? undefined : r.headers
    const target = forwardTarget(req.url ?? '/', input, paths.forwardPath)
    const onStatus = statusHookOf(d)
    // Without a delay, forward at once: no closures for a timer that is not set.
    if (d.delayMs === undefined) return proxy.forward(req, res, target, extra, held, tap, onStatus, trace)
    const wait = trace === undefined ? undefined : delaySpan(trace, d.delayMs)
    afterDelay(
      d,
      res,
      () => {
        wait?.end()
        proxy.forward(req, res, target, extra, held, tap, onStatus, trace)
      },
      () => {
        wait?.end()
        tap?.end(false)
      },
    )
  }
  const run = (req: IncomingMessage, res: ServerResponse, input: RequestInput, held: HeldBody | undefined): void => {
    if (debug.active(req)) {
      const start = process.hrtime.bigint()
      return decide(input, true, (d) => onDecision(req, res, input, d, held, Number((process.hrtime.bigint() - start) / 1000n)))
    }
    decide(input, false, (d) => onDecision(req, res, input, d, held))
  }
  const fallback: Handler = (req, res) => {
    const input = inputFromRequest(req, paths.encodedSlashes)
    // Tracing on: the request's server span, under the trace its client sent (http/spans.ts).
    if (tracer !== null) input.trace = serverSpan(req, res, worker)
    // Only a request that a policy with an LLM rule matches waits for (the first MiB of) its body.
    const budget = llm === undefined ? undefined : bodyBudget(llm.bundle(), input)
    if (budget !== undefined)
      return readHead(req, budget, (held) => run(req, res, { ...input, body: held.held, bodyComplete: held.ended }, held))
    run(req, res, input, undefined)
  }
  const upgrade = (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
    const input = inputFromRequest(req, paths.encodedSlashes)
    decide(input, false, (d) => {
      slots?.holdUntilClosed(d, socket)
      // A delayed upgrade waits as a request does; its socket closing is its client leaving.
      const target = forwardTarget(req.url ?? '/', input, paths.forwardPath)
      if (d.allowed) afterDelay(d, socket, () => proxy.upgrade(req, socket, head, target, statusHookOf(d)))
      else endRaw(socket, d.status, d.retryAfterS ? ['retry-after', String(d.retryAfterS)] : [])
    })
  }
  /**
   * The client lane takes a request no reserved route, LLM rule, trace or debug session concerns,
   * whose target goes on the proxy's own pool; anything else is node:http's (the fallback above).
   */
  const take = (x: LaneExchange): boolean => {
    if (tracer !== null || routes.has(pathOf(x.url)) || llm?.bundle()?.llm === true || debug.active(x)) return false
    const input = inputFromRequest(x, paths.encodedSlashes)
    const target = forwardTarget(x.url, input, paths.forwardPath)
    if (!proxy.laneTarget(target)) return false
    x.input = input
    x.target = target
    return true
  }
  const laneDecided = (x: LaneExchange, d: Decision): void => {
    const r = decisionResponse(d, { exposeReason, path: x.input!.path })
    slots?.holdUntilClosed(d, x)
    // No LLM rule when it was taken; a bundle loaded since may have one: its call is settled as not metered.
    tapOf(d, undefined)?.end(false)
    if (!d.allowed) return x.answer(r.status, r.headers, r.body)
    x.extraHeaders = r.headers.length === 0 ? undefined : r.headers
    x.onStatus = statusHookOf(d)
    // A delayed request waits as on the fallback path; its socket closing is its client leaving.
    afterDelay(d, x.socket, () => void (x.closed || proxy.forwardLane(x)))
  }
  const lane: LaneRoutes | undefined = proxy.laneTarget('/')
    ? { take, run: (x) => decide(x.input!, false, (d) => laneDecided(x, d)) }
    : undefined
  return { routes, fallback, upgrade, lane }
}
