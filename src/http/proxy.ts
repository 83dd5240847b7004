/**
 * Reverse proxy on an undici keep-alive Pool. Bodies stream both ways with
 * backpressure (never buffered whole); hop-by-hop headers are dropped; the
 * X-Forwarded-* headers are set; status and headers (every Set-Cookie) come
 * back unchanged. The raw dispatch handler is used instead of pool.request()
 * so response headers are copied as raw buffers without a parse/re-serialise
 * round trip and no Readable is allocated per response.
 */
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http'
import { Readable, type Duplex } from 'node:stream'
import { Pool, type Dispatcher } from 'undici'
import { ClientClosedError } from '../errors.js'
import type { LlmExchange } from '../llm/exchange.js'
import type { Logger } from '../observe/logger.js'
import type { Settings } from '../settings.js'
import { downstreamHeaders, upstreamHeaders } from './forward-headers.js'
import { LlmRelay, type RelayHost } from './llm-relay.js'
import { endRaw, rawHead, sendJson } from './respond.js'

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
   * Forward `req`; `extraHeaders` (flat name/value list) are added to the
   * response. `held`: the body's start already read (LLM rules); `tap`: the
   * LLM exchange that reads (and may cut) the response as it passes.
   */
  forward(req: IncomingMessage, res: ServerResponse, extraHeaders: readonly string[] | undefined, held?: HeldBody, tap?: LlmExchange): void
  /** Proxy a WebSocket (or other) upgrade; `head` is the first chunk already read. */
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void
  close(): Promise<void>
}

const TIMEOUT_CODES = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'UND_ERR_CONNECT_TIMEOUT'])

const kForwarding = Symbol('forwarding')
type ForwardedResponse = ServerResponse & { [kForwarding]?: Forwarding }

/** undici hands the handler the response head as it arrived (raw buffers) on the controller; the guard proves it without a cast. */
function isBufferList(v: unknown): v is Buffer[] {
  return Array.isArray(v) && (v.length === 0 || Buffer.isBuffer(v[0]))
}

/** The head as raw [name, value, …] buffers: the controller's own list, else (never on a Pool) rebuilt from the parsed object. */
function rawHeadersOf(c: Dispatcher.DispatchController, parsed: IncomingHttpHeaders): Buffer[] {
  if (isBufferList(c.rawHeaders)) return c.rawHeaders
  const out: Buffer[] = []
  for (const name in parsed) {
    const v = parsed[name]
    for (const one of Array.isArray(v) ? v : [v ?? '']) out.push(Buffer.from(name, 'latin1'), Buffer.from(one, 'latin1'))
  }
  return out
}

/**
 * One proxied request as an undici dispatch handler (the core callback API:
 * raw header buffers, no per-response Readable). A class with prototype
 * methods instead of a closure-built object keeps the per-request allocation
 * to one small object. Backpressure: pause the controller until the client drains.
 */
class Forwarding implements Dispatcher.DispatchHandler, RelayHost {
  controller: Dispatcher.DispatchController | undefined = undefined
  done = false
  /** Set when an LLM stream was ended here (max_completion_tokens): the upstream abort that follows is expected. */
  cut = false
  tap: LlmExchange | undefined = undefined
  /** An LLM call's response side (counts, may cut, decodes). */
  relay: LlmRelay | undefined = undefined
  /** The client socket, kept because undici may detach req.socket when it destroys the body. */
  readonly client: Duplex

  constructor(
    readonly req: IncomingMessage,
    readonly res: ServerResponse,
    readonly extraHeaders: readonly string[] | undefined,
    readonly failure: (f: Forwarding, err: Error & { code?: string }) => void,
  ) {
    this.client = req.socket
  }

  resume(): void {
    this.controller?.resume()
  }

  abort(err: Error): void {
    this.controller?.abort(err)
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller
    if (this.res.destroyed) controller.abort(new ClientClosedError())
  }

  onResponseStart(controller: Dispatcher.DispatchController, statusCode: number, headers: IncomingHttpHeaders, statusText?: string): void {
    if (statusCode < 200) return // interim responses are not relayed
    let raw = rawHeadersOf(controller, headers)
    if (this.tap !== undefined) {
      this.relay = new LlmRelay(this, this.tap)
      raw = this.relay.head(statusCode, raw, this.req.url ?? '')
    }
    this.res.writeHead(statusCode, statusText, downstreamHeaders(raw, this.extraHeaders))
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.relay !== undefined) {
      if (!this.relay.data(chunk)) controller.pause()
      return
    }
    if (this.res.write(chunk)) return
    // Backpressure: undici stops reading the backend until the client drains.
    controller.pause()
    this.res.once('drain', onResponseDrain)
  }

  onResponseEnd(): void {
    if (this.relay !== undefined) return this.relay.complete()
    this.done = true
    this.tap?.end(true)
    this.res.end()
  }

  onResponseError(_controller: Dispatcher.DispatchController, err: Error): void {
    if (this.cut) return
    this.done = true
    this.tap?.end(false)
    this.failure(this, err)
  }
}

/** 'drain' listener shared by every response (no closure per request): the client caught up, read the backend again. */
function onResponseDrain(this: ForwardedResponse): void {
  this[kForwarding]?.resume()
}

/** 'close' listener shared by every response (no closure per request): a client that left cancels its upstream request. */
function onResponseClose(this: ForwardedResponse): void {
  const f = this[kForwarding]
  if (f === undefined || f.done) return
  f.tap?.end(false) // an LLM call the client left settles on what was streamed
  f.abort(new ClientClosedError())
}

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

  function fail(req: IncomingMessage, res: ServerResponse, client: Duplex, err: Error & { code?: string }): void {
    const timeout = err.code !== undefined && TIMEOUT_CODES.has(err.code)
    const status = timeout ? 504 : 502
    // The client went away: nothing to answer. (req itself may be destroyed, and
    // req.socket detached, by undici, which destroys the request body on an
    // upstream error; that alone does not mean the client has gone.)
    if (res.destroyed || client.destroyed) return
    if (res.headersSent) {
      // The client already has the backend's status and part of the body: say that, not "502".
      log.error(
        { err: { code: err.code, message: err.message }, method: req.method, path: req.url, status: res.statusCode },
        timeout ? 'response aborted: backend body timed out' : 'response aborted: backend connection lost mid-body',
      )
      res.destroy(err) // mid-body: the only honest signal is a truncated response
      return
    }
    log.error(
      { err: { code: err.code, message: err.message }, method: req.method, path: req.url, status },
      timeout ? 'backend timed out' : 'backend unreachable',
    )
    sendJson(res, status, { error: timeout ? 'backend_timeout' : 'bad_gateway', status })
  }

  const trustCheck = settings.trustedProxiesText ? isTrustedPeer : undefined
  const failure = (f: Forwarding, err: Error & { code?: string }): void => fail(f.req, f.res, f.client, err)

  function forward(
    req: IncomingMessage,
    res: ServerResponse,
    extraHeaders: readonly string[] | undefined,
    held?: HeldBody,
    tap?: LlmExchange,
  ): void {
    const f = new Forwarding(req, res, extraHeaders, failure)
    f.tap = tap
    ;(res as ForwardedResponse)[kForwarding] = f
    res.once('close', onResponseClose)
    const headers: string[] = []
    const body = upstreamHeaders(req, trustCheck?.(req.socket.remoteAddress ?? '') === true, headers)
    if (tap !== undefined) askIdentity(headers)
    pool.dispatch(
      {
        origin: origin.origin,
        path: req.url!,
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

  function upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    const headers: string[] = []
    upstreamHeaders(req, trustCheck?.(req.socket.remoteAddress ?? '') === true, headers)
    const protocol = String(req.headers.upgrade ?? 'websocket')
    socket.on('error', () => socket.destroy())
    pool
      .upgrade({ path: req.url!, method: req.method as Dispatcher.HttpMethod, headers, protocol })
      .then(({ headers: resHeaders, socket: upstream }) => {
        const flat: string[] = []
        for (const [name, value] of Object.entries(resHeaders)) {
          for (const v of Array.isArray(value) ? value : [value]) flat.push(name, String(v))
        }
        socket.write(rawHead(101, flat))
        if (head.length) upstream.write(head)
        upstream.on('error', () => socket.destroy())
        socket.on('close', () => upstream.destroy())
        upstream.on('close', () => socket.destroy())
        upstream.pipe(socket)
        socket.pipe(upstream)
      })
      .catch((err: Error & { code?: string }) => {
        log.error({ err: { code: err.code, message: err.message }, path: req.url }, 'backend upgrade failed')
        if (!socket.destroyed)
          endRaw(socket, 502, ['content-type', 'application/json'], JSON.stringify({ error: 'bad_gateway', status: 502 }))
      })
  }

  return { forward, upgrade, close: () => pool.close() }
}
