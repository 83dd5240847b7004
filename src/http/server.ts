/**
 * The HTTP listener: production limits (slowloris timeouts, header size,
 * keep-alive), reserved paths looked up before anything else, an optional
 * access log, and graceful shutdown that drains in-flight requests.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import type { Duplex } from 'node:stream'
import { urlForLog } from '../engine/log-key.js'
import type { Logger } from '../observe/logger.js'
import type { Settings } from '../settings.js'
import { Lane, type LaneRoutes } from './lane.js'
import { endRaw } from './respond.js'

export type Handler = (req: IncomingMessage, res: ServerResponse) => void
export type UpgradeHandler = (req: IncomingMessage, socket: Duplex, head: Buffer) => void

export interface ListenerOptions {
  settings: Readonly<Settings>
  log: Logger
  /** Exact-path handlers (path without query) served before `fallback`. */
  routes: ReadonlyMap<string, Handler>
  /** Everything that is not a reserved path. */
  fallback: Handler
  upgrade?: UpgradeHandler
  /** The requests the client lane serves without node:http's objects (lane.ts); not with the access log on. */
  lane?: LaneRoutes
}

export interface Listener {
  /** Not listening yet: the runtime listens on its socket (runtime/runtime.ts). */
  server: Server
  /** Stop accepting, let in-flight requests finish within `timeoutMs`, then close what is left. */
  shutdown(timeoutMs: number): Promise<void>
}

export function pathOf(url: string): string {
  const q = url.indexOf('?')
  return q === -1 ? url : url.slice(0, q)
}

export function createListener({ settings, log, routes, fallback, upgrade, lane }: ListenerOptions): Listener {
  let draining = false
  const server = createServer(
    {
      headersTimeout: settings.headersTimeoutMs,
      requestTimeout: settings.requestTimeoutMs,
      keepAliveTimeout: settings.keepAliveTimeoutMs,
      maxHeaderSize: settings.maxHeaderSize,
      // Latency over throughput for small proxied responses.
      noDelay: true,
    },
    (req, res) => {
      if (draining) res.setHeader('connection', 'close')
      if (settings.accessLog) accessLog(log, req, res)
      const route = routes.get(pathOf(req.url ?? '/'))
      if (route) route(req, res)
      else fallback(req, res)
    },
  )
  // Every header line is kept, as on the client lane: node:http's default (maxHeadersCount 2000) stops
  // collecting about 1,000 lines in, so the tail of a long head was neither decided on nor forwarded
  // (nor its Host seen: a 400). FAIRVISOR_MAX_HEADER_SIZE bounds a head on both paths.
  server.maxHeadersCount = 0
  const clientError = (err: Error & { code?: string }, socket: Duplex): void => {
    if (!socket.writable) return void socket.destroy()
    // Responses still being written on the connection go first, as on the lane: written at once, the
    // error's answer would reach the client as the answer to a request before it (whose answer is lost).
    const res = (socket as Duplex & { _httpMessage?: ServerResponse | null })._httpMessage
    if (res != null) {
      // Bytes after a request that asked to close are ignored (RFC 9112 §9.6): its answer closes the connection.
      if (err.code === 'HPE_CLOSED_CONNECTION') return
      return void res.once('finish', () => clientError(err, socket))
    }
    const status = err.code === 'HPE_HEADER_OVERFLOW' ? 431 : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400
    log.debug({ err: { code: err.code, message: err.message } }, 'client error')
    endRaw(socket, status)
  }
  server.on('clientError', clientError)
  // Every connection, for shutdown: one that has not sent a byte (a client's preconnected or pooled socket)
  // has no request in flight, yet closeIdleConnections leaves it (Node counts a connection busy from its
  // start, for headersTimeout), and it would hold the drain to its deadline.
  const sockets = new Set<Socket>()
  server.on('connection', (sock: Socket) => {
    sockets.add(sock)
    sock.once('close', () => sockets.delete(sock))
  })
  if (upgrade) {
    server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
      if (draining) return void socket.destroy()
      upgrade(req, socket, head)
    })
  }

  const own = lane === undefined || settings.accessLog ? undefined : new Lane(server, lane, settings, log)

  function shutdown(timeoutMs: number): Promise<void> {
    draining = true
    own?.close(false)
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        log.warn({ timeoutMs }, 'shutdown deadline reached; closing remaining connections')
        server.closeAllConnections()
        own?.close(true)
      }, timeoutMs)
      timer.unref()
      server.close(() => {
        clearTimeout(timer)
        resolve()
      })
      // Idle keep-alive sockets would otherwise hold close() open until they time out.
      server.closeIdleConnections()
      for (const sock of sockets) if (sock.bytesRead === 0) sock.destroy()
    })
  }

  return { server, shutdown }
}

function accessLog(log: Logger, req: IncomingMessage, res: ServerResponse): void {
  const start = process.hrtime.bigint()
  // Read now: by 'finish' node:http may have let go of the socket (req.socket null), which killed the process.
  const ip = req.socket.remoteAddress
  res.once('finish', () => {
    log.info(
      {
        method: req.method,
        url: urlForLog(req.url),
        status: res.statusCode,
        ms: Number(process.hrtime.bigint() - start) / 1e6,
        ip,
        reason: res.getHeader('x-fairvisor-reason'),
      },
      'access',
    )
  })
}
