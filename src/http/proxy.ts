/**
 * Reverse proxy on an undici keep-alive Pool. Bodies stream both ways with
 * backpressure (never buffered whole); hop-by-hop headers are dropped; the
 * X-Forwarded-* headers are set; status and headers (every Set-Cookie) come
 * back unchanged. A raw dispatch handler (forwarding.ts) is used instead of
 * pool.request() so response headers are copied as raw buffers without a
 * parse/re-serialise round trip and no Readable is allocated per response.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import { Readable, type Duplex } from 'node:stream'
import { Pool, type Dispatcher } from 'undici'
import type { LlmExchange } from '../llm/exchange.js'
import { urlForLog } from '../engine/log-key.js'
import type { Logger } from '../observe/logger.js'
import type { Settings } from '../settings.js'
import { DirectForwarding } from './direct-forwarding.js'
import type { LaneExchange } from './lane-exchange.js'
import { HAS_BODY, HAS_HOST, upstreamHeaders } from './forward-headers.js'
import { Forwarding, type Forwarded } from './forwarding.js'
import { UpstreamPool } from './upstream.js'
import { upstreamSpan } from './spans.js'
import type { Context } from '../observe/tracing.js'
import { backendFailure, endRaw, rawHead, sendJson } from './respond.js'

export interface ProxyOptions {
  settings: Readonly<Settings>
  log: Logger
  /** True when the socket peer is a trusted proxy whose X-Forwarded-* we keep. */
  isTrustedPeer(ip: string): boolean
}

/** A request whose body's first MiB was read for an LLM rule: forwarded first, then the rest of `req` unread. */
export interface HeldBody {
  held: Buffer
  /** Bytes read past the first MiB with the last chunk. */
  spill: Buffer | undefined
  /** The whole body was read. */
  ended: boolean
}

export interface Proxy {
  /**
   * Forward `req` to `target` (its request-target as request/target.ts's
   * forwardTarget gives it); `extraHeaders` (flat name/value list) are added to the
   * response. `held`: the body's start already read (LLM rules); `tap`: the
   * LLM exchange that reads (and may cut) the response as it passes; `onStatus`: told
   * once the status the client gets is known (not when the client left first); `trace`: a traced
   * request's server span context, which the upstream call's span goes under (http/spans.ts).
   */
  forward(
    req: IncomingMessage,
    res: ServerResponse,
    target: string,
    extraHeaders: readonly string[] | undefined,
    held?: HeldBody,
    tap?: LlmExchange,
    onStatus?: (status: number) => void,
    trace?: Context,
  ): void
  /** The client lane (lane.ts) can send `target` on the proxy's own pool: a plain-HTTP backend, a target written as it is. */
  laneTarget(target: string): boolean
  /** Forward a request of the client lane (no body, no LLM rule, not traced) on the proxy's own pool. */
  forwardLane(x: LaneExchange): void
  /** Proxy a WebSocket (or other) upgrade to `target`; `head` is the first chunk already read; `onStatus` as for forward (101, or 502). */
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer, target: string, onStatus?: (status: number) => void): void
  close(): Promise<void>
}

/** A request-target the direct path writes as it is (undici's own check); anything else goes through undici, which refuses it. */
const VALID_TARGET = /^\/[\u0021-\u00ff]*$/

/** An LLM call asks the upstream for an uncompressed answer, which the gateway can count and cut (a compressed one is decoded). */
function askIdentity(headers: string[]): void {
  let found = false
  for (let i = 0; i < headers.length; i += 2) {
    if (headers[i]!.toLowerCase() !== 'accept-encoding') continue
    headers[i + 1] = 'identity'
    found = true
  }
  if (!found) headers.push('accept-encoding', 'identity')
}

/** Sets the Content-Length the client sent to `n` (a body without one is framed by undici). */
function setContentLength(headers: string[], n: number): void {
  for (let i = 0; i < headers.length; i += 2) if (headers[i]!.toLowerCase() === 'content-length') headers[i + 1] = String(n)
}

/** The held start of a body, then the rest of the request as it arrives (backpressure through the iterator). */
async function* heldThenRest(req: IncomingMessage, h: HeldBody): AsyncGenerator<Buffer> {
  yield h.held
  if (h.spill !== undefined) yield h.spill
  for await (const chunk of req) yield chunk as Buffer
}

export function createProxy({ settings, log, isTrustedPeer }: ProxyOptions): Proxy {
  const origin = settings.backendUrl!
  const pool = new Pool(origin.origin, {
    connections: settings.upstreamConnections,
    pipelining: 1,
    keepAliveTimeout: 4000,
    headersTimeout: settings.upstreamTimeoutMs,
    bodyTimeout: settings.upstreamTimeoutMs,
    connect: { timeout: settings.upstreamConnectTimeoutMs },
  })

  // A plain-HTTP backend gets the proxy's own pool for requests without a body or LLM rule (upstream.ts).
  const direct =
    origin.protocol === 'http:'
      ? new UpstreamPool({
          host: origin.hostname,
          port: Number(origin.port || 80),
          connections: settings.upstreamConnections,
          timeoutMs: settings.upstreamTimeoutMs,
          connectTimeoutMs: settings.upstreamConnectTimeoutMs,
        })
      : undefined

  /** Answers a forwarding the backend failed; the status the client got, if it got one now. */
  function fail(req: IncomingMessage, res: ServerResponse, client: Duplex, err: Error & { code?: string }): number | undefined {
    const f = backendFailure(err.code)
    // The client went away: nothing to answer. (req itself may be destroyed, and
    // req.socket detached, by undici, which destroys the request body on an
    // upstream error; that alone does not mean the client has gone.)
    if (res.destroyed || client.destroyed) return undefined
    if (res.headersSent) {
      // The client already has the backend's status and part of the body: say that, not "502".
      log.error(
        { err: { code: err.code, message: err.message }, method: req.method, path: urlForLog(req.url), status: res.statusCode },
        f.cut,
      )
      res.destroy(err) // mid-body: the only honest signal is a truncated response
      return undefined
    }
    log.error({ err: { code: err.code, message: err.message }, method: req.method, path: urlForLog(req.url), status: f.status }, f.failed)
    res.statusMessage = '' // a backend reason writeHead refused stays set, and would refuse the 502 too
    sendJson(res, f.status, f.answer)
    return f.status
  }

  const trustCheck = settings.trustedProxiesText ? isTrustedPeer : undefined
  /** The whole request head for the own pool (the request has no body). */
  const headOf = (method: string, target: string, headers: string[], flags: number): string => {
    let head = `${method} ${target} HTTP/1.1\r\n`
    for (let i = 0; i < headers.length; i += 2) head += `${headers[i]}: ${headers[i + 1]}\r\n`
    if ((flags & HAS_HOST) === 0) head += `host: ${origin.host}\r\n`
    return `${head}connection: keep-alive\r\n\r\n`
  }
  const forwardLane = (x: LaneExchange): void => {
    const headers: string[] = []
    const flags = upstreamHeaders(x, trustCheck?.(x.socket.remoteAddress ?? '') === true, headers)
    direct!.request(x, headOf(x.method, x.target, headers, flags), x.method === 'HEAD')
  }
  const failure = (f: Forwarded, err: Error & { code?: string }): void => {
    const status = fail(f.req, f.res, f.client, err)
    if (status !== undefined) f.statusKnown(status)
  }

  function forward(
    req: IncomingMessage,
    res: ServerResponse,
    target: string,
    extraHeaders: readonly string[] | undefined,
    held?: HeldBody,
    tap?: LlmExchange,
    onStatus?: (status: number) => void,
    trace?: Context,
  ): void {
    const headers: string[] = []
    const flags = upstreamHeaders(req, trustCheck?.(req.socket.remoteAddress ?? '') === true, headers)
    const body = (flags & HAS_BODY) !== 0
    // A traced request stays on undici, whose handler carries the upstream span (http/spans.ts).
    if (direct !== undefined && !body && tap === undefined && held === undefined && trace === undefined && VALID_TARGET.test(target)) {
      const method = req.method!
      const head = headOf(method, target, headers, flags)
      return direct.request(new DirectForwarding(req, res, extraHeaders, failure, onStatus), head, method === 'HEAD')
    }
    const f = new Forwarding(req, res, extraHeaders, failure, tap, onStatus)
    if (tap !== undefined) askIdentity(headers)
    // A body held whole is sent as held, which the gateway may have changed (llm/stream-usage.ts): its length is the length.
    if (held?.ended === true) setContentLength(headers, held.held.length)
    if (trace !== undefined) f.span = upstreamSpan(trace, req.method ?? 'GET', origin, target, headers)
    pool.dispatch(
      {
        origin: origin.origin,
        path: target,
        method: req.method as Dispatcher.HttpMethod,
        headers,
        body: !body
          ? null
          : held === undefined
            ? req
            : held.ended
              ? held.held
              : Readable.from(heldThenRest(req, held), { objectMode: false }),
      },
      f,
    )
  }

  function upgrade(req: IncomingMessage, socket: Duplex, head: Buffer, target: string, onStatus?: (status: number) => void): void {
    const headers: string[] = []
    upstreamHeaders(req, trustCheck?.(req.socket.remoteAddress ?? '') === true, headers)
    const protocol = String(req.headers.upgrade ?? 'websocket')
    socket.on('error', () => socket.destroy())
    pool
      .upgrade({ path: target, method: req.method as Dispatcher.HttpMethod, headers, protocol })
      .then(({ headers: resHeaders, socket: upstream }) => {
        const flat: string[] = []
        for (const [name, value] of Object.entries(resHeaders)) {
          for (const v of Array.isArray(value) ? value : [value]) flat.push(name, String(v))
        }
        socket.write(rawHead(101, flat))
        onStatus?.(101)
        if (head.length) upstream.write(head)
        upstream.on('error', () => socket.destroy())
        socket.on('close', () => upstream.destroy())
        upstream.on('close', () => socket.destroy())
        upstream.pipe(socket)
        socket.pipe(upstream)
      })
      .catch((err: Error & { code?: string }) => {
        log.error({ err: { code: err.code, message: err.message }, path: urlForLog(req.url) }, 'backend upgrade failed')
        if (socket.destroyed) return
        endRaw(socket, 502, ['content-type', 'application/json'], JSON.stringify({ error: 'bad_gateway', status: 502 }))
        onStatus?.(502)
      })
  }

  return {
    forward,
    laneTarget: (target) => direct !== undefined && VALID_TARGET.test(target),
    forwardLane,
    upgrade,
    close: () => {
      direct?.close()
      return pool.close()
    },
  }
}
