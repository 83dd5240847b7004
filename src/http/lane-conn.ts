/**
 * One connection of the client lane (lane.ts): Node's parser reads its
 * socket, the requests it serves are answered in order, the first one it
 * does not serve hands the connection to node:http.
 */
import { createRequire } from 'node:module'
import type { Logger } from '../observe/logger.js'
import type { Lane } from './lane.js'
import { LaneExchange, type LaneOwner, plainHead } from './lane-exchange.js'
import { type Coded, consume, HTTPParser, type Parser, pauseReading, type RawSocket, resumeReading } from './node-parser.js'

const { methods } = createRequire(import.meta.url)('_http_common') as { methods: string[] }

export class LaneConn implements LaneOwner {
  readonly parser: Parser
  private pending: string[] = []
  private pendingUrl = ''
  /** Requests in arrival order; the first one is answered, the others wait. */
  private readonly queue: LaneExchange[] = []
  /** When the current request's first byte came (performance.now()); 0 between requests. */
  started = 0
  /** A request node:http serves: its head again, then what was read after it (set in kOnExecute). */
  private handoverHead: string | undefined = undefined
  private rest: Buffer | undefined = undefined
  /** A parse error behind requests still being answered: the server's 'clientError' once they are. */
  private failed: Coded | undefined = undefined
  /** A response said Connection: close: the connection ends after it. */
  private closing = false
  /** The client closed its side. */
  private ended = false
  private dead = false
  /** A response was written past the socket's high-water mark: the next step waits for 'drain'. */
  private waiting = false

  constructor(
    readonly lane: Lane,
    readonly socket: RawSocket,
  ) {
    const p = new HTTPParser()
    p.initialize(HTTPParser.REQUEST, {}, lane.options.maxHeaderSize, 0)
    this.parser = p
    p[HTTPParser.kOnMessageBegin] = (): void => void (this.started = performance.now())
    // A long head comes in parts (past 32 header lines, or across reads): the url with its first part.
    p[HTTPParser.kOnHeaders] = (headers: string[], url: string): void => {
      this.pending.push(...headers)
      this.pendingUrl += url
    }
    p[HTTPParser.kOnHeadersComplete] = this.onHead
    p[HTTPParser.kOnExecute] = this.onExecute
    socket.setTimeout(lane.options.keepAliveTimeoutMs)
    socket.on('timeout', this.onTimeout)
    socket.on('drain', this.onDrain)
    socket.on('end', this.onEnd)
    socket.on('error', this.onError)
    socket.on('close', this.onClose)
    consume(p, socket)
  }

  get log(): Logger {
    return this.lane.log
  }

  /** Idle: nothing being answered, nothing of a next request read. */
  get idle(): boolean {
    return this.queue.length === 0 && this.started === 0 && this.handoverHead === undefined
  }

  connectionLines(x: LaneExchange): string {
    if (x.keepAlive && !this.ended && !this.lane.draining) return this.lane.keepAliveLines
    this.closing = true
    return 'Connection: close\r\n'
  }

  private onHead = (
    major: number,
    minor: number,
    headers: string[] | undefined,
    method: number,
    url: string | undefined,
    _s: unknown,
    _r: unknown,
    upgrade: boolean,
    keepAlive: boolean,
  ): number => {
    this.started = 0
    let raw = headers ?? []
    if (this.pending.length > 0) {
      raw = this.pending.concat(raw)
      this.pending.length = 0
    }
    const target = this.pendingUrl + (url ?? '')
    this.pendingUrl = ''
    if (this.closing) return 1 // after a request that asked to close: not answered
    const name = methods[method] ?? 'GET'
    const x = new LaneExchange(this, name, target, raw, this.socket)
    if (this.handoverHead !== undefined || upgrade || major !== 1 || minor !== 1 || !plainHead(raw) || !this.lane.routes.take(x)) {
      let head = `${name} ${target} HTTP/${major}.${minor}\r\n`
      for (let i = 0; i < raw.length; i += 2) head += `${raw[i]}: ${raw[i + 1]}\r\n`
      this.handoverHead ??= `${head}\r\n`
      return 2 // stop after this head (llhttp's upgrade): node:http reads it again
    }
    x.keepAlive = keepAlive
    this.queue.push(x)
    if (this.queue.length === 1 && !this.waiting) this.lane.routes.run(x)
    else pauseReading(this.socket) // pipelined, or the client not reading: answered in turn; read more once they are
    return 0
  }

  private onExecute = (r: number | Coded): void => {
    this.socket._unrefTimer()
    if (typeof r !== 'number') return this.parseError(r)
    if (this.handoverHead === undefined || this.rest !== undefined) return
    const b = (this.parser as Parser & { getCurrentBuffer(): Buffer }).getCurrentBuffer()
    this.rest = b.subarray(r)
    pauseReading(this.socket)
    if (this.queue.length === 0) this.handover()
  }

  private parseError(err: Coded): void {
    this.dead = true
    pauseReading(this.socket)
    if (this.queue.length === 0) this.clientError(err)
    else this.failed = err
  }

  /** As node:http: the server's 'clientError' answers (400, 431, 408), else the connection is closed. */
  clientError(err: Coded): void {
    this.dead = true
    this.started = 0
    if (!this.lane.server.emit('clientError', err, this.socket)) this.socket.destroy()
  }

  finished(x: LaneExchange): void {
    if (this.queue[0] !== x) {
      const i = this.queue.indexOf(x)
      if (i !== -1) this.queue.splice(i, 1)
      return
    }
    this.queue.shift()
    if (this.closing || this.socket.destroyed) {
      this.dropAll()
      return this.endSoon()
    }
    // A client that does not read its answers is neither answered further nor read from until it
    // does (node:http stops reading the same way): a pipelined flood cannot fill the write buffer.
    if (!this.socket.writableNeedDrain) return this.proceed()
    this.waiting = true
    pauseReading(this.socket)
  }

  /** The connection's next step once a response is written and the client is reading. */
  private proceed(): void {
    const next = this.queue[0]
    // A loop turn later: a decision may answer at once (a reject from an in-process store), and a
    // pipelined burst answered within one call stack nests frames per request until it overflows.
    if (next !== undefined) return void setImmediate(this.runNext, next)
    if (this.failed !== undefined) return this.clientError(this.failed)
    if (this.rest !== undefined) return this.handover()
    if (this.lane.draining) return this.endSoon()
    if (this.handoverHead === undefined) resumeReading(this.socket)
  }

  /**
   * node:http serves the connection from the waiting head on: its connection listener takes the socket
   * (its parser reads the handle from now on), then gets the head and what was read after it as the
   * 'data' its listener reads when a socket is not consumed (and the end, if the client has closed its side).
   */
  private handover(): void {
    const s = this.socket
    this.detach()
    resumeReading(s)
    this.lane.handOver(s)
    s.emit('data', Buffer.concat([Buffer.from(this.handoverHead!, 'latin1'), this.rest!]))
    if (this.ended) s.emit('end')
  }

  private detach(): void {
    this.lane.conns.delete(this)
    const s = this.socket
    s.setTimeout(0)
    s.off('timeout', this.onTimeout)
    s.off('drain', this.onDrain)
    s.off('end', this.onEnd)
    s.off('error', this.onError)
    s.off('close', this.onClose)
    this.parser.unconsume()
    this.parser.free()
  }

  private runNext = (next: LaneExchange): void => {
    if (this.queue[0] === next && !this.dead) this.lane.routes.run(next)
  }

  private onDrain = (): void => {
    this.queue[0]?.conn?.resume()
    if (!this.waiting) return
    this.waiting = false
    this.proceed()
  }

  /** Idle past the keep-alive time: closed. A request being answered has the backend's timeout instead. */
  private onTimeout = (): void => {
    if (this.queue.length === 0 && this.started === 0) this.socket.destroy()
  }

  /**
   * The client closed its side: as node:http (without httpAllowHalfOpen), what it asked is dropped and
   * the connection ends; a head cut short is a client error; a request waiting for node:http goes to it.
   */
  private onEnd = (): void => {
    this.ended = true
    const err = this.parser.finish()
    if (err !== undefined && this.queue.length === 0 && !this.dead) return this.clientError(err)
    this.dropAll()
    if (this.rest !== undefined && this.failed === undefined) return this.handover()
    if (!this.socket.destroyed) this.socket.end()
  }

  /** After a last response: ended, and closed once it is written (node:http's destroySoon), not when the client closes. */
  private endSoon(): void {
    const s = this.socket
    if (!s.destroyed) s.end(() => s.destroy())
  }

  /** The requests being answered or waiting are not: their backend calls are cancelled, their holds given back. */
  private dropAll(): void {
    for (const x of this.queue.splice(0)) {
      x.gone = true
      x.conn?.abort()
      x.close()
    }
  }

  private onError = (): void => void this.socket.destroy()

  private onClose = (): void => {
    this.detach()
    this.dead = true
    this.dropAll()
  }

  /** The lane's check (once a second): a head that took too long is answered 408, as node:http does. */
  check(now: number, limitMs: number): void {
    if (this.started !== 0 && this.queue.length === 0 && !this.dead && now - this.started > limitMs)
      this.clientError(Object.assign(new Error('Request timeout'), { code: 'ERR_HTTP_REQUEST_TIMEOUT' }))
  }
}
