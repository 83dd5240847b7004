/**
 * The client lane: the proxy listener's connections read by the gateway's
 * own loop on Node's C++ HTTP parser (node-parser.ts consumes the socket's
 * handle, as node:http's server does), with no IncomingMessage,
 * ServerResponse or stream per request. It serves the common request (HTTP/1.1,
 * no body, no upgrade, no Expect, a route that says it can: routes.ts);
 * at the first request it does not, it hands the connection to node:http
 * for the rest of its life: that request's head, written again from what
 * was parsed, and the bytes read after it are put back on the socket,
 * which node:http's own connection listener then reads from the start.
 * Pipelined requests are answered in order, one at a time (reading stops
 * while some wait). Timeouts as node:http's: an idle connection closes after
 * the keep-alive time, a head not complete within the headers (or request)
 * timeout gets a 408; a parse error goes to the server's 'clientError'.
 */
import type { Server } from 'node:http'
import type { Socket } from 'node:net'
import type { Logger } from '../observe/logger.js'
import { LaneConn } from './lane-conn.js'
import type { LaneExchange } from './lane-exchange.js'
import type { RawSocket } from './node-parser.js'

export interface LaneRoutes {
  /** True: the route serves `x` (its input and target set on it); false: node:http serves the connection from `x` on. */
  take(x: LaneExchange): boolean
  /** Decide `x` and answer it (its turn on the connection has come). */
  run(x: LaneExchange): void
}

export interface LaneOptions {
  headersTimeoutMs: number
  requestTimeoutMs: number
  keepAliveTimeoutMs: number
  maxHeaderSize: number
}

export class Lane {
  readonly conns = new Set<LaneConn>()
  draining = false
  readonly keepAliveLines: string
  private readonly nodeListener: (socket: Socket) => void
  private readonly timer: NodeJS.Timeout

  constructor(
    readonly server: Server,
    readonly routes: LaneRoutes,
    readonly options: LaneOptions,
    readonly log: Logger,
  ) {
    this.keepAliveLines = `Connection: keep-alive\r\nKeep-Alive: timeout=${Math.floor(options.keepAliveTimeoutMs / 1000)}\r\n`
    // node:http's own connection listener (the one http.Server adds), kept for the connections handed over.
    this.nodeListener = server.listeners('connection')[0] as (socket: Socket) => void
    server.removeListener('connection', this.nodeListener)
    server.on('connection', (socket: Socket) => {
      const raw = socket as RawSocket
      if (raw._handle === null || this.draining) return this.handOver(socket)
      this.conns.add(new LaneConn(this, raw))
    })
    const { headersTimeoutMs: h, requestTimeoutMs: r } = options
    const limit = r > 0 ? Math.min(h, r) : h
    this.timer = setInterval(
      () => {
        const now = performance.now()
        for (const c of this.conns) c.check(now, limit)
      },
      Math.max(100, Math.min(1000, limit)),
    )
    this.timer.unref()
    server.once('close', () => clearInterval(this.timer))
  }

  handOver(socket: Socket): void {
    this.nodeListener.call(this.server, socket)
  }

  /** Shutdown: connections answer with Connection: close from now on; idle ones close now, or `all` of them. */
  close(all: boolean): void {
    this.draining = true
    for (const c of this.conns) if (all || c.idle) c.socket.destroy()
  }
}
