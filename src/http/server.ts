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

export function createListener({ settings, log, routes, fallback, upgrade }: ListenerOptions): Listener {
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
  server.on('clientError', (err: Error & { code?: string }, socket: Duplex) => {
    if (!socket.writable) return socket.destroy()
    const status = err.code === 'HPE_HEADER_OVERFLOW' ? 431 : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400
    log.debug({ err: { code: err.code, message: err.message } }, 'client error')
    endRaw(socket, status)
  })
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

  function shutdown(timeoutMs: number): Promise<void> {
    draining = true
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        log.warn({ timeoutMs }, 'shutdown deadline reached; closing remaining connections')
        server.closeAllConnections()
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
  res.once('finish', () => {
    log.info(
      {
        method: req.method,
        url: urlForLog(req.url),
        status: res.statusCode,
        ms: Number(process.hrtime.bigint() - start) / 1e6,
        ip: req.socket.remoteAddress,
        reason: res.getHeader('x-fairvisor-reason'),
      },
      'access',
    )
  })
}
