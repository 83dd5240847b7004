/**
 * One request on the client lane (lane.ts), from its head to the end of its
 * response: what the route needs to decide it (method, url, rawHeaders and
 * socket, as an IncomingMessage has them), and the response written to the
 * client's socket as strings, with no ServerResponse. A backend's answer
 * comes through the proxy's upstream pool (upstream.ts): the head is kept
 * until the first body bytes (a small answer leaves in one write), a body
 * without a Content-Length is sent chunked, and a client that falls behind
 * stops the backend's connection until the socket drains.
 */
import { STATUS_CODES } from 'node:http'
import type { Socket } from 'node:net'
import type { Logger } from '../observe/logger.js'
import type { RequestInput } from '../request/view.js'
import { urlForLog } from '../engine/log-key.js'
import { BAD_REASON, backendFailure, utcDate } from './respond.js'
import type { UpstreamConn, UpstreamExchange } from './upstream.js'

/** The connection an exchange answers on (lane.ts). */
export interface LaneOwner {
  readonly socket: Socket
  readonly log: Logger
  /** The Connection (and Keep-Alive) lines of `x`'s response; after a `close` one the connection ends. */
  connectionLines(x: LaneExchange): string
  /** The exchange's response is written whole (or dropped): the next request's turn. */
  finished(x: LaneExchange): void
}

const SMALL = 16 * 1024

/** Names whose presence sends a request to node:http: a body (or its framing), Expect: 100-continue. */
const NOT_PLAIN = new Set(['content-length', 'transfer-encoding', 'expect'])
const NOT_PLAIN_LENGTH: boolean[] = []
for (const n of NOT_PLAIN) NOT_PLAIN_LENGTH[n.length] = true

/** No body, no Expect, and a Host header (node:http answers an HTTP/1.1 request without one 400 itself). */
export function plainHead(raw: string[]): boolean {
  let host = false
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!
    if (name.length === 4) host ||= name.toLowerCase() === 'host'
    else if (NOT_PLAIN_LENGTH[name.length] === true && NOT_PLAIN.has(name.toLowerCase())) return false
  }
  return host
}

export class LaneExchange implements UpstreamExchange {
  conn: UpstreamConn | undefined = undefined
  gone = false
  done = false
  /** The response is over (written, failed or the client gone): slot holds see it as a closed ServerResponse. */
  closed = false
  extraHeaders: readonly string[] | undefined = undefined
  /** Set by the route that takes it (routes.ts): the request as the engine reads it, and its target upstream. */
  input: RequestInput | undefined = undefined
  target = ''
  /** The client keeps the connection after this request (HTTP/1.1 without Connection: close). */
  keepAlive = true
  onStatus: ((status: number) => void) | undefined = undefined
  private closeListeners: (() => void)[] | undefined = undefined
  /** The head, made and not written yet. */
  private head_: string | undefined = undefined
  private began = false
  private chunked = false
  private held: Buffer | undefined = undefined
  /** The backend's status, once its head came. */
  private status = 0

  constructor(
    readonly owner: LaneOwner,
    readonly method: string,
    readonly url: string,
    readonly rawHeaders: string[],
    readonly socket: Socket,
  ) {}

  /** As a ServerResponse's 'close' (slot-holds.ts): once, when the response is over, with `this` the exchange. */
  on(_event: 'close', listener: () => void): this {
    ;(this.closeListeners ??= []).push(listener)
    return this
  }

  statusKnown(status: number): void {
    const told = this.onStatus
    if (told === undefined) return
    this.onStatus = undefined
    told(status)
  }

  /** A whole answer of the gateway's own (a reject, a 502): `headers` flat, its length added if they have none. */
  answer(status: number, headers: readonly string[], body: string): void {
    if (this.done) return
    this.done = true
    let head = `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Unknown'}\r\n`
    let length = false
    for (let i = 0; i < headers.length; i += 2) {
      const name = headers[i]!
      length ||= name.length === 14 && name.toLowerCase() === 'content-length'
      head += `${name}: ${headers[i + 1]}\r\n`
    }
    if (!length) head += `Content-Length: ${Buffer.byteLength(body)}\r\n`
    head += `Date: ${utcDate()}\r\n${this.owner.connectionLines(this)}\r\n`
    this.socket.write(this.method === 'HEAD' ? head : head + body)
    this.close()
  }

  head(status: number, reason: string, headers: string[]): void {
    this.statusKnown(status)
    this.status = status
    if (BAD_REASON.test(reason)) throw Object.assign(new TypeError('Invalid character in statusMessage'), { code: 'ERR_INVALID_CHAR' })
    let head = `HTTP/1.1 ${status} ${reason}\r\n`
    let length = false
    let date = false
    for (let i = 0; i < headers.length; i += 2) {
      const name = headers[i]!
      if (name.length === 14 && name.toLowerCase() === 'content-length') length = true
      else if (name.length === 4 && name.toLowerCase() === 'date') date = true
      head += `${name}: ${headers[i + 1]}\r\n`
    }
    // As node:http frames a body of unknown length to an HTTP/1.1 client.
    this.chunked = !length && this.method !== 'HEAD' && status !== 204 && status !== 304
    if (this.chunked) head += 'Transfer-Encoding: chunked\r\n'
    if (!date) head += `Date: ${utcDate()}\r\n`
    this.head_ = `${head}${this.owner.connectionLines(this)}\r\n`
  }

  /** A chunk is held until the next one, the end (one write for a small answer) or the end of what was read (flush). */
  body(chunk: Buffer): boolean {
    const held = this.held
    this.held = chunk
    return held === undefined || this.write(held, false)
  }

  flush(): boolean {
    const held = this.held
    if (held === undefined) return true
    this.held = undefined
    return this.write(held, false)
  }

  end(): void {
    if (this.done) return
    this.done = true
    const held = this.held
    this.held = undefined
    if (held !== undefined || this.head_ !== undefined || this.chunked) this.write(held, true)
    this.close()
  }

  /** Writes the head (if not yet), `chunk` framed, and at the end the chunked terminator: one string where small. */
  private write(chunk: Buffer | undefined, last: boolean): boolean {
    let text = this.head_ ?? ''
    this.head_ = undefined
    this.began = true
    const framed = this.chunked && chunk !== undefined && chunk.length > 0
    if (framed) text += `${chunk.length.toString(16)}\r\n`
    if (chunk !== undefined && chunk.length > SMALL) {
      this.socket.cork()
      if (text.length > 0) this.socket.write(text, 'latin1')
      this.socket.write(chunk)
      text = ''
      process.nextTick(uncork, this.socket)
    } else if (chunk !== undefined) text += chunk.toString('latin1')
    if (framed) text += '\r\n'
    if (last && this.chunked) text += '0\r\n\r\n'
    return text.length === 0 ? !this.socket.writableNeedDrain : this.socket.write(text, 'latin1')
  }

  /** The backend failed: a 502 or 504 while nothing was sent, else the response is cut (the connection closes). */
  error(err: Error & { code?: string }): void {
    if (this.done) return
    const log = this.owner.log
    const f = backendFailure(err.code)
    const logged = {
      err: { code: err.code, message: err.message },
      method: this.method,
      path: urlForLog(this.url),
      status: f.status as number,
    }
    if (this.socket.destroyed) {
      this.done = true
      return this.close()
    }
    if (this.began || this.head_ !== undefined) {
      this.done = true
      logged.status = this.status // the status the client has, not a 502
      log.error(logged, f.cut)
      this.socket.destroy()
      return this.close()
    }
    log.error(logged, f.failed)
    this.statusKnown(f.status)
    const body = JSON.stringify(f.answer)
    // The headers of proxy.ts's sendJson, in its order: the same 502/504 on both paths.
    this.answer(f.status, ['content-type', 'application/json', 'content-length', String(body.length), 'cache-control', 'no-store'], body)
  }

  /** The response is over: 'close' listeners, then the connection's next request. */
  close(): void {
    if (this.closed) return
    this.closed = true
    this.done = true
    const ls = this.closeListeners
    this.closeListeners = undefined
    if (ls !== undefined) for (const l of ls) l.call(this)
    this.owner.finished(this)
  }
}

function uncork(socket: Socket): void {
  socket.uncork()
}
