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
import { createRequire } from 'node:module'
import { connect, type Socket } from 'node:net'
import { downstreamFromRaw } from './forward-headers.js'

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
  end(): void
  error(err: Error & { code?: string }): void
}

interface Parser {
  initialize(type: number, resource: object, maxHeaderSize: number, lenient: number): void
  execute(data: Buffer): number | (Error & { code?: string })
  finish(): undefined | (Error & { code?: string })
  free(): void
  [key: number]: unknown
}
interface ParserClass {
  new (): Parser
  RESPONSE: number
  kOnHeaders: number
  kOnHeadersComplete: number
  kOnBody: number
  kOnMessageComplete: number
}
// node:_http_common is Node's own (undocumented but stable since v0.x) home of the llhttp binding its http client uses.
const { HTTPParser } = createRequire(import.meta.url)('_http_common') as { HTTPParser: ParserClass }

const IDLE_MS = 4000 // as undici's keepAliveTimeout in proxy.ts

function coded(message: string, code: string): Error & { code: string } {
  return Object.assign(new Error(message), { code })
}

export interface UpstreamOptions {
  host: string
  port: number
  connections: number
  timeoutMs: number
  connectTimeoutMs: number
}

export class UpstreamConn {
  readonly socket: Socket
  readonly parser: Parser
  x: UpstreamExchange | undefined = undefined
  /** Header pairs the parser flushed before the head was complete (long or fragmented heads). */
  pending: string[] = []
  interim = false
  headSeen = false
  skipBody = false
  keepAlive = false
  /** Idle time before closing, lowered by the backend's own Keep-Alive: timeout hint. */
  keepAliveMs = IDLE_MS
  failed: (Error & { code?: string }) | undefined = undefined

  constructor(readonly pool: UpstreamPool) {
    const o = pool.options
    const socket = connect({ host: o.host, port: o.port, noDelay: true })
    this.socket = socket
    socket.setTimeout(o.connectTimeoutMs)
    const p = new HTTPParser()
    p.initialize(HTTPParser.RESPONSE, {}, 0, 0)
    this.parser = p
    p[HTTPParser.kOnHeaders] = (headers: string[]) => {
      for (let i = 0; i < headers.length; i++) this.pending.push(headers[i]!)
    }
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
      if (this.x !== undefined && !this.x.body(chunk)) socket.pause()
    }
    p[HTTPParser.kOnMessageComplete] = (): void => this.onComplete()
    socket.on('connect', () => socket.setTimeout(this.x === undefined ? this.keepAliveMs : o.timeoutMs))
    socket.on('data', (d: Buffer) => {
      const r = p.execute(d)
      if (typeof r !== 'number') this.fail(r)
    })
    socket.on('end', () => {
      const r = p.finish() // a body delimited by the close ends here
      this.fail(r ?? coded('other side closed', 'UND_ERR_SOCKET'))
    })
    socket.on('timeout', () => {
      if (socket.connecting) return this.fail(coded('Connect Timeout Error', 'UND_ERR_CONNECT_TIMEOUT'))
      if (this.x === undefined) return void socket.destroy() // idle keep-alive over
      this.fail(this.headSeen ? coded('Body Timeout Error', 'UND_ERR_BODY_TIMEOUT') : coded('Headers Timeout Error', 'UND_ERR_HEADERS_TIMEOUT'))
    })
    socket.on('error', (err) => this.fail(err))
    socket.on('close', () => {
      this.fail(coded('other side closed', 'UND_ERR_SOCKET'))
      p.free()
      pool.closed(this)
    })
  }

  start(x: UpstreamExchange, head: string, skipBody: boolean): void {
    this.x = x
    x.conn = this
    this.headSeen = false
    this.skipBody = skipBody
    this.pending.length = 0
    if (!this.socket.connecting) this.socket.setTimeout(this.pool.options.timeoutMs)
    this.socket.write(head, 'latin1')
  }

  /** The exchange's client left: the response cannot be finished on this connection, which closes. */
  abort(): void {
    this.x = undefined
    this.socket.destroy()
  }

  resume(): void {
    this.socket.resume()
  }

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
  fail(err: Error & { code?: string }): void {
    const x = this.x
    this.x = undefined
    this.failed ??= err
    if (!this.socket.destroyed) this.socket.destroy()
    if (x !== undefined) {
      x.conn = undefined
      x.error(err)
    }
  }
}

interface Queued {
  x: UpstreamExchange
  head: string
  skipBody: boolean
}

export class UpstreamPool {
  private readonly idle: UpstreamConn[] = []
  private readonly queue: Queued[] = []
  private count = 0
  private closing = false

  constructor(readonly options: UpstreamOptions) {}

  /** Sends `head` (the whole request: it has no body) and tells `x` what comes back. */
  request(x: UpstreamExchange, head: string, skipBody: boolean): void {
    const c = this.idle.pop()
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
    c.socket.setTimeout(c.keepAliveMs)
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
    while (q !== undefined && q.x.gone) q = this.queue.shift()
    return q
  }

  close(): void {
    this.closing = true
    for (const c of this.idle.splice(0)) c.socket.destroy()
  }
}
