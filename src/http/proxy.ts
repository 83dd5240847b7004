/**
 * Reverse proxy on an undici keep-alive Pool. Bodies stream both ways with
 * backpressure (never buffered whole); hop-by-hop headers are dropped; the
 * X-Forwarded-* headers are set; status and headers (every Set-Cookie) come
 * back unchanged. The raw dispatch handler is used instead of pool.request()
 * so response headers are copied as raw buffers without a parse/re-serialise
 * round trip and no Readable is allocated per response.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Duplex } from 'node:stream'
import { Pool, type Dispatcher } from 'undici'
import type { Logger } from '../observe/logger.js'
import type { Settings } from '../settings.js'
import { endRaw, rawHead, sendJson } from './respond.js'

/** RFC 9110 §7.6.1 hop-by-hop fields, plus proxy-connection which some clients still send. */
const HOP_BY_HOP = new Set([
  'connection', 'keep-alive', 'proxy-connection', 'proxy-authenticate', 'proxy-authorization',
  'te', 'trailer', 'transfer-encoding', 'upgrade',
])
/** Replaced by the proxy itself; `expect` is answered by Node's server (100-continue). */
const REPLACED = new Set(['x-forwarded-for', 'x-forwarded-proto', 'x-forwarded-host', 'expect'])

export interface ProxyOptions {
  settings: Readonly<Settings>
  log: Logger
  /** True when the socket peer is a trusted proxy whose X-Forwarded-* we keep. */
  isTrustedPeer(ip: string): boolean
}

export interface Proxy {
  /** Forward `req`; `extraHeaders` (flat name/value list) are added to the response. */
  forward(req: IncomingMessage, res: ServerResponse, extraHeaders: string[] | undefined): void
  /** Proxy a WebSocket (or other) upgrade; `head` is the first chunk already read. */
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void
  close(): Promise<void>
}

function connectionTokens(value: string): Set<string> | undefined {
  let out: Set<string> | undefined
  for (const t of value.split(',')) {
    const v = t.trim().toLowerCase()
    if (v && v !== 'close' && v !== 'keep-alive') (out ??= new Set()).add(v)
  }
  return out
}

/**
 * Header-name lengths that can be special (hop-by-hop, replaced, or read by the
 * proxy). Names of any other length are copied without lower-casing them, which
 * saves a string allocation per header on the hot path.
 */
const SPECIAL_LENGTH: boolean[] = []
for (const name of [...HOP_BY_HOP, ...REPLACED, 'host', 'content-length']) SPECIAL_LENGTH[name.length] = true

/** Removes from a flat [name, value, …] list the names a Connection header listed. */
function dropListed(out: string[], listed: Set<string>, from: number): void {
  for (let i = out.length - 2; i >= from; i -= 2) if (listed.has(out[i]!.toLowerCase())) out.splice(i, 2)
}

/**
 * Appends the request headers for the backend to `out` as a flat
 * [name, value, …] list, in one pass over rawHeaders (req.headers is never
 * built here). Returns whether the request has a body.
 */
function upstreamHeaders(req: IncomingMessage, trusted: boolean, out: string[]): boolean {
  const raw = req.rawHeaders
  let connection: string | undefined
  let host: string | undefined
  let body = false
  let xff: string | undefined
  let xfp: string | undefined
  let xfh: string | undefined
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!
    if (SPECIAL_LENGTH[name.length] === true) {
      const lower = name.toLowerCase()
      if (HOP_BY_HOP.has(lower)) {
        if (lower === 'connection') connection = connection === undefined ? raw[i + 1] : `${connection},${raw[i + 1]}`
        else if (lower === 'transfer-encoding') body = true
        continue
      }
      if (REPLACED.has(lower)) {
        if (lower === 'x-forwarded-for') xff = xff === undefined ? raw[i + 1] : `${xff}, ${raw[i + 1]}`
        else if (lower === 'x-forwarded-proto') xfp ??= raw[i + 1]
        else if (lower === 'x-forwarded-host') xfh ??= raw[i + 1]
        continue
      }
      if (lower === 'host') host ??= raw[i + 1]
      else if (lower === 'content-length' && raw[i + 1] !== '0') body = true
    }
    out.push(name, raw[i + 1]!)
  }
  const listed = connection === undefined ? undefined : connectionTokens(connection)
  if (listed) dropListed(out, listed, 0)
  const peer = req.socket.remoteAddress ?? ''
  // Always append the peer so the backend sees the full chain; only a trusted
  // peer's claims about the original scheme and host are kept.
  out.push('x-forwarded-for', xff ? `${xff}, ${peer}` : peer)
  out.push('x-forwarded-proto', trusted && xfp ? xfp : (req.socket as { encrypted?: boolean }).encrypted ? 'https' : 'http')
  const fwdHost = trusted && xfh ? xfh : host
  if (fwdHost) out.push('x-forwarded-host', fwdHost)
  return body
}

/** Response headers for the client: raw buffers from undici, hop-by-hop removed. */
function downstreamHeaders(raw: Buffer[], extra: string[] | undefined): string[] {
  const out: string[] = []
  let listed: Set<string> | undefined
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toString('latin1')
    if (SPECIAL_LENGTH[name.length] === true) {
      const lower = name.toLowerCase()
      if (lower === 'connection') listed = connectionTokens(raw[i + 1]!.toString('latin1'))
      if (HOP_BY_HOP.has(lower)) continue
    }
    out.push(name, raw[i + 1]!.toString('latin1'))
  }
  if (listed) dropListed(out, listed, 0)
  if (extra) for (let i = 0; i < extra.length; i++) out.push(extra[i]!)
  return out
}

const TIMEOUT_CODES = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'UND_ERR_CONNECT_TIMEOUT'])

const kForwarding = Symbol('forwarding')
type ForwardedResponse = ServerResponse & { [kForwarding]?: Forwarding }

/**
 * One proxied request as an undici dispatch handler (the core callback API:
 * raw header buffers, no per-response Readable). A class with prototype
 * methods instead of a closure-built object keeps the per-request allocation
 * to one small object.
 */
class Forwarding {
  abort: ((err?: Error) => void) | undefined = undefined
  resume: (() => void) | undefined = undefined
  done = false
  /** The client socket, kept because undici may detach req.socket when it destroys the body. */
  readonly client: Duplex

  constructor(
    readonly req: IncomingMessage,
    readonly res: ServerResponse,
    readonly extraHeaders: string[] | undefined,
    readonly failure: (f: Forwarding, err: Error & { code?: string }) => void,
  ) {
    this.client = req.socket
  }

  onConnect(abort: (err?: Error) => void): void {
    this.abort = abort
    if (this.res.destroyed) abort(new Error('client closed the connection'))
  }

  onHeaders(statusCode: number, rawHeaders: Buffer[], resume: () => void, statusText: string): boolean {
    if (statusCode < 200) return true // interim responses are not relayed
    this.resume = resume
    this.res.writeHead(statusCode, statusText, downstreamHeaders(rawHeaders, this.extraHeaders))
    return true
  }

  onData(chunk: Buffer): boolean {
    if (this.res.write(chunk)) return true
    // Backpressure: undici pauses reading the backend until the client drains.
    this.res.once('drain', this.resume!)
    return false
  }

  onComplete(): void {
    this.done = true
    this.res.end()
  }

  onError(err: Error): void {
    this.done = true
    this.failure(this, err)
  }
}

/** 'close' listener shared by every response (no closure per request): a client that left cancels its upstream request. */
function onResponseClose(this: ForwardedResponse): void {
  const f = this[kForwarding]
  if (f !== undefined && !f.done && f.abort !== undefined) f.abort(new Error('client closed the connection'))
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
    log.error({ err: { code: err.code, message: err.message }, method: req.method, path: req.url, status }, timeout ? 'backend timed out' : 'backend unreachable')
    if (res.headersSent) {
      res.destroy(err) // mid-body: the only honest signal is a truncated response
      return
    }
    sendJson(res, status, { error: timeout ? 'backend_timeout' : 'bad_gateway', status })
  }

  const trustCheck = settings.trustedProxiesText ? isTrustedPeer : undefined
  const failure = (f: Forwarding, err: Error & { code?: string }): void => fail(f.req, f.res, f.client, err)

  function forward(req: IncomingMessage, res: ServerResponse, extraHeaders: string[] | undefined): void {
    const f = new Forwarding(req, res, extraHeaders, failure)
    ;(res as ForwardedResponse)[kForwarding] = f
    res.once('close', onResponseClose)
    const headers: string[] = []
    const body = upstreamHeaders(req, trustCheck !== undefined && trustCheck(req.socket.remoteAddress ?? ''), headers)
    pool.dispatch(
      { origin: origin.origin, path: req.url!, method: req.method as Dispatcher.HttpMethod, headers, body: body ? req : null },
      f as unknown as Dispatcher.DispatchHandler,
    )
  }

  function upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    const headers: string[] = []
    upstreamHeaders(req, trustCheck !== undefined && trustCheck(req.socket.remoteAddress ?? ''), headers)
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
        if (!socket.destroyed) endRaw(socket, 502, ['content-type', 'application/json'], JSON.stringify({ error: 'bad_gateway', status: 502 }))
      })
  }

  return { forward, upgrade, close: () => pool.close() }
}
