/**
 * The proxy's own keep-alive pool to a plain-HTTP backend, for its common
 * case (a request without a body and without an LLM rule): the request head
 * goes out as one string over a pooled net.Socket, and the response is read
 * by Node's own HTTP parser (the llhttp binding node:http's client uses),
 * with no request object, header object or handler adapter per request.
 * Requests with a body, LLM calls, upgrades and HTTPS backends stay on
 * undici (proxy.ts). Timeouts, error codes and the idle keep-alive time are
 * undici's, so the proxy answers and logs alike on both paths.
 */
import { connect } from 'node:net'
import { downstreamFromRaw } from './forward-headers.js'
import { type Coded, consume, HTTPParser, type Parser, pauseReading, type RawSocket, resumeReading } from './node-parser.js'

/** What a request on the pool is told: the response head (hop-by-hop removed), body chunks, the end, or an error. */
export interface UpstreamExchange {
  /** Set by the pool when the request is on a connection; undefined while queued. */
  conn: UpstreamConn | undefined
  /** The client left: a queued request is dropped, a started one has aborted its connection. */
  gone: boolean
  readonly extraHeaders: readonly string[] | undefined
  head(status: number, reason: string, headers: string[]): void
  /** False: the client is behind; the pool stops reading until resume(). */
  body(chunk: Buffer): boolean
  /** What the connection read is parsed: a chunk body() held goes out now. False as for body(). */
  flush(): boolean
  end(): void
  error(err: Coded): void
}

const IDLE_MS = 4000 // as undici's keepAliveTimeout in proxy.ts
const RETRY = new Set(['UND_ERR_SOCKET', 'ECONNRESET', 'EPIPE'])
const coded = (message: string, code: string): Coded => Object.assign(new Error(message), { code })

export type UpstreamOptions = Record<'port' | 'connections' | 'timeoutMs' | 'connectTimeoutMs', number> & { host: string }

export class UpstreamConn {
  readonly socket: RawSocket
  readonly parser: Parser
  x: UpstreamExchange | undefined = undefined
  /** Header pairs the parser flushed before the head was complete (long or fragmented heads). */
  pending: string[] = []
  interim = false
  headSeen = false
  skipBody = false
  /** The request on the connection, kept to send again on a new one when a reused connection closes first. */
  head = ''
  served = 0
  keepAlive = false
  /** Idle time after which the connection is not reused, lowered by the backend's own Keep-Alive: timeout hint. */
  keepAliveMs = IDLE_MS
  /** When it went idle (performance.now()): a connection idle past keepAliveMs is closed, not reused. */
  idleSince = 0

  constructor(readonly pool: UpstreamPool) {
    const o = pool.options
    const socket = connect({ host: o.host, port: o.port, noDelay: true }) as RawSocket
    this.socket = socket
    socket.setTimeout(o.connectTimeoutMs)
    const p = new HTTPParser()
    p.initialize(HTTPParser.RESPONSE, {}, 0, 0)
    this.parser = p
    p[HTTPParser.kOnHeaders] = (headers: string[]) => void this.pending.push(...headers)
    p[HTTPParser.kOnHeadersComplete] = (
      _maj: number,
      _min: number,
      headers: string[] | undefined,
      _m: unknown,
      _u: unknown,
      status: number,
      reason: string,
      _upgrade: boolean,
      keepAlive: boolean,
    ): number => this.onHead(headers, status, reason, keepAlive)
    p[HTTPParser.kOnBody] = (chunk: Buffer): void => {
      if (this.x !== undefined && !this.x.body(chunk)) this.pause()
    }
    p[HTTPParser.kOnMessageComplete] = (): void => this.onComplete()
    // One timeout for the life of the connection (no timer re-armed per request): the request's
    // inactivity limit while busy; while idle, the backend's close or this limit ends it.
    socket.on('connect', () => {
      socket.setTimeout(o.timeoutMs)
      consume(p, socket) // the parser reads the socket (node-parser.ts); what it read comes to kOnExecute
    })
    const read = (r: number | Coded): void => {
      if (typeof r !== 'number') this.fail(r)
      else if (this.x !== undefined && !this.x.flush()) this.pause()
    }
    p[HTTPParser.kOnExecute] = (r: number | Coded): void => {
      socket._unrefTimer() // restarts the timeout, as the socket's own read path would
      read(r)
    }
    socket.on('data', (d: Buffer) => read(p.execute(d))) // starts reading; data comes here only if not consumed
    socket.on('end', () => {
      const r = p.finish() // a body delimited by the close ends here
      this.fail(r ?? coded('other side closed', 'UND_ERR_SOCKET'))
    })
    socket.on('timeout', () => {
      if (socket.connecting) return this.fail(coded('Connect Timeout Error', 'UND_ERR_CONNECT_TIMEOUT'))
      if (this.x === undefined) return void socket.destroy() // idle keep-alive over
      this.fail(
        this.headSeen ? coded('Body Timeout Error', 'UND_ERR_BODY_TIMEOUT') : coded('Headers Timeout Error', 'UND_ERR_HEADERS_TIMEOUT'),
      )
    })
    socket.on('error', (err) => this.fail(err))
    socket.on('close', () => {
      this.fail(coded('other side closed', 'UND_ERR_SOCKET'))
      p.unconsume()
      p.free()
      pool.closed(this)
    })
  }

  start(x: UpstreamExchange, head: string, skipBody: boolean): void {
    this.x = x
    x.conn = this
    this.headSeen = false
    this.skipBody = skipBody
    this.head = head
    this.served++
    this.pending.length = 0
    this.socket.write(head, 'latin1')
  }

  /** The exchange's client left: the response cannot be finished on this connection, which closes. */
  abort(): void {
    this.x = undefined
    this.socket.destroy()
  }

  /** Stops reading the backend until resume(). */
  pause = (): void => pauseReading(this.socket)
  resume = (): void => resumeReading(this.socket)

  private onHead(headers: string[] | undefined, status: number, reason: string, keepAlive: boolean): number {
    let raw = headers
    if (raw === undefined || this.pending.length > 0) {
      raw = this.pending.concat(raw ?? [])
      this.pending.length = 0
    }
    const x = this.x
    if (x === undefined) {
      this.fail(coded('response without a request', 'UND_ERR_SOCKET'))
      return 1
    }
    this.interim = status < 200
    if (this.interim) {
      if (status !== 101) return 0 // 100, 103: not relayed
      this.fail(coded('unexpected upgrade', 'UND_ERR_SOCKET'))
      return 1
    }
    this.headSeen = true
    this.keepAlive = keepAlive
    try {
      x.head(status, reason, downstreamFromRaw(raw, x.extraHeaders, this))
    } catch (err) {
      this.fail(err as Error)
      return 1
    }
    return this.skipBody ? 1 : 0
  }

  private onComplete(): void {
    this.pending.length = 0
    if (this.interim) return void (this.interim = false)
    const x = this.x
    if (x === undefined) return
    this.x = undefined
    x.conn = undefined
    if (this.keepAlive && !this.socket.destroyed) this.pool.release(this)
    else this.socket.destroy()
    x.end()
  }

  /** Ends the current exchange with `err` (if any) and closes the connection. */
  fail(err: Coded): void {
    const x = this.x
    this.x = undefined
    if (!this.socket.destroyed) this.socket.destroy()
    if (x === undefined) return
    x.conn = undefined
    // A kept-alive connection the backend closed as the request went out (nothing came back): the
    // request, which has no body, was not read there; it goes once more on another connection.
    if (this.served > 1 && !this.headSeen && !this.interim && RETRY.has(err.code ?? ''))
      return this.pool.request(x, this.head, this.skipBody)
    x.error(err)
  }
}

type Queued = { x: UpstreamExchange; head: string; skipBody: boolean }

export class UpstreamPool {
  private readonly idle: UpstreamConn[] = []
  private readonly queue: Queued[] = []
  private count = 0
  private closing = false

  constructor(readonly options: UpstreamOptions) {}

  /** Sends `head` (the whole request: it has no body) and tells `x` what comes back. */
  request(x: UpstreamExchange, head: string, skipBody: boolean): void {
    let c = this.idle.pop()
    if (c !== undefined && performance.now() - c.idleSince > c.keepAliveMs) {
      // Idle too long: the backend may be closing it right now. All idle ones are older still.
      for (const old of this.idle.splice(0)) old.socket.destroy()
      c.socket.destroy()
      c = undefined
    }
    if (c !== undefined) return c.start(x, head, skipBody)
    if (this.count < this.options.connections && !this.closing) {
      this.count++
      return new UpstreamConn(this).start(x, head, skipBody)
    }
    this.queue.push({ x, head, skipBody })
  }

  release(c: UpstreamConn): void {
    if (this.closing) return void c.socket.destroy()
    const next = this.next()
    if (next !== undefined) return c.start(next.x, next.head, next.skipBody)
    c.idleSince = performance.now()
    this.idle.push(c)
  }

  closed(c: UpstreamConn): void {
    this.count--
    const i = this.idle.indexOf(c)
    if (i !== -1) this.idle.splice(i, 1)
    const next = this.closing ? undefined : this.next()
    if (next !== undefined) {
      this.count++
      new UpstreamConn(this).start(next.x, next.head, next.skipBody)
    }
  }

  private next(): Queued | undefined {
    let q = this.queue.shift()
    while (q?.x.gone) q = this.queue.shift()
    return q
  }

  close(): void {
    this.closing = true
    for (const c of this.idle.splice(0)) c.socket.destroy()
  }
}
