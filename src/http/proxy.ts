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

function connectionTokens(value: string | string[] | undefined): Set<string> | undefined {
  if (value === undefined) return undefined
  const text = Array.isArray(value) ? value.join(',') : value
  const out = new Set<string>()
  for (const t of text.split(',')) {
    const v = t.trim().toLowerCase()
    if (v && v !== 'close' && v !== 'keep-alive') out.add(v)
  }
  return out.size ? out : undefined
}

/** Request headers for the backend as a flat [name, value, …] list. */
function upstreamHeaders(req: IncomingMessage, trusted: boolean): string[] {
  const raw = req.rawHeaders
  const listed = connectionTokens(req.headers.connection)
  const out: string[] = []
  let xff: string | undefined
  let xfp: string | undefined
  let xfh: string | undefined
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!
    const lower = name.toLowerCase()
    if (HOP_BY_HOP.has(lower) || listed?.has(lower)) continue
    if (REPLACED.has(lower)) {
      if (lower === 'x-forwarded-for') xff = xff === undefined ? raw[i + 1] : `${xff}, ${raw[i + 1]}`
      else if (lower === 'x-forwarded-proto') xfp ??= raw[i + 1]
      else if (lower === 'x-forwarded-host') xfh ??= raw[i + 1]
      continue
    }
    out.push(name, raw[i + 1]!)
  }
  const peer = req.socket.remoteAddress ?? ''
  // Always append the peer so the backend sees the full chain; only a trusted
  // peer's claims about the original scheme and host are kept.
  out.push('x-forwarded-for', xff ? `${xff}, ${peer}` : peer)
  out.push('x-forwarded-proto', trusted && xfp ? xfp : (req.socket as { encrypted?: boolean }).encrypted ? 'https' : 'http')
  const host = trusted && xfh ? xfh : req.headers.host
  if (host) out.push('x-forwarded-host', host)
  return out
}

/** Response headers for the client: raw buffers from undici, hop-by-hop removed. */
function downstreamHeaders(raw: Buffer[], extra: string[] | undefined): string[] {
  const out: string[] = []
  let listed: Set<string> | undefined
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toString('latin1')
    const lower = name.toLowerCase()
    if (lower === 'connection') listed = connectionTokens(raw[i + 1]!.toString('latin1'))
    if (HOP_BY_HOP.has(lower)) continue
    out.push(name, raw[i + 1]!.toString('latin1'))
  }
  if (listed) {
    for (let i = out.length - 2; i >= 0; i -= 2) if (listed.has(out[i]!.toLowerCase())) out.splice(i, 2)
  }
  if (extra) for (let i = 0; i < extra.length; i++) out.push(extra[i]!)
  return out
}

const TIMEOUT_CODES = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'UND_ERR_CONNECT_TIMEOUT'])

function hasBody(req: IncomingMessage): boolean {
  const h = req.headers
  return h['transfer-encoding'] !== undefined || (h['content-length'] !== undefined && h['content-length'] !== '0')
}

export function sendJson(res: ServerResponse, status: number, body: object, headers?: string[]): void {
  const text = JSON.stringify(body)
  const flat = ['content-type', 'application/json', 'content-length', String(Buffer.byteLength(text)), 'cache-control', 'no-store']
  if (headers) flat.push(...headers)
  res.writeHead(status, flat)
  res.end(text)
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

  function forward(req: IncomingMessage, res: ServerResponse, extraHeaders: string[] | undefined): void {
    const client = req.socket
    let abortUpstream: ((err?: Error) => void) | undefined
    let done = false
    const onClose = (): void => {
      if (!done && abortUpstream) abortUpstream(new Error('client closed the connection'))
    }
    res.once('close', onClose)
    const handler: Dispatcher.DispatchHandler = {
      onConnect(abort: (err?: Error) => void) {
        abortUpstream = abort
        if (res.destroyed) abort(new Error('client closed the connection'))
      },
      onHeaders(statusCode: number, rawHeaders: Buffer[], resume: () => void, statusText: string) {
        if (statusCode < 200) return true // interim responses are not relayed
        res.writeHead(statusCode, statusText, downstreamHeaders(rawHeaders, extraHeaders))
        res.on('drain', resume)
        return true
      },
      onData(chunk: Buffer) {
        return res.write(chunk)
      },
      onComplete() {
        done = true
        res.end()
      },
      onError(err: Error) {
        done = true
        fail(req, res, client, err)
      },
    } as unknown as Dispatcher.DispatchHandler
    pool.dispatch(
      {
        origin: origin.origin,
        path: req.url!,
        method: req.method as Dispatcher.HttpMethod,
        headers: upstreamHeaders(req, isTrustedPeer(req.socket.remoteAddress ?? '')),
        body: hasBody(req) ? req : null,
      },
      handler,
    )
  }

  function upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    const headers = upstreamHeaders(req, isTrustedPeer(req.socket.remoteAddress ?? ''))
    const protocol = String(req.headers.upgrade ?? 'websocket')
    socket.on('error', () => socket.destroy())
    pool
      .upgrade({ path: req.url!, method: req.method as Dispatcher.HttpMethod, headers, protocol })
      .then(({ headers: resHeaders, socket: upstream }) => {
        let head101 = 'HTTP/1.1 101 Switching Protocols\r\n'
        for (const [name, value] of Object.entries(resHeaders)) {
          for (const v of Array.isArray(value) ? value : [value]) head101 += `${name}: ${v}\r\n`
        }
        socket.write(`${head101}\r\n`)
        if (head.length) upstream.write(head)
        upstream.on('error', () => socket.destroy())
        socket.on('close', () => upstream.destroy())
        upstream.on('close', () => socket.destroy())
        upstream.pipe(socket)
        socket.pipe(upstream)
      })
      .catch((err: Error & { code?: string }) => {
        log.error({ err: { code: err.code, message: err.message }, path: req.url }, 'backend upgrade failed')
        if (!socket.destroyed) {
          const body = JSON.stringify({ error: 'bad_gateway', status: 502 })
          socket.end(`HTTP/1.1 502 Bad Gateway\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\nconnection: close\r\n\r\n${body}`)
        }
      })
  }

  return { forward, upgrade, close: () => pool.close() }
}
