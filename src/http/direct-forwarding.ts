/**
 * One proxied request on the proxy's own upstream pool (upstream.ts): the
 * response head and body go to the client as they arrive, with backpressure
 * (the connection stops reading until the client drains), and a client that
 * leaves closes the upstream connection, which cancels the request there.
 * The counterpart of forwarding.ts for requests without a body or LLM rule.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import type { Duplex } from 'node:stream'
import { type ForwardFailure, headAfterInterim } from './forwarding.js'
import { BAD_REASON, utcDate } from './respond.js'
import type { UpstreamConn, UpstreamExchange } from './upstream.js'

const kDirect = Symbol('direct-forwarding')
const SMALL = 16 * 1024
type DirectResponse = ServerResponse & { [kDirect]?: DirectForwarding }

export class DirectForwarding implements UpstreamExchange {
  conn: UpstreamConn | undefined = undefined
  gone = false
  done = false
  /** The client socket, kept as forwarding.ts keeps it. */
  readonly client: Duplex
  private onStatus: ((status: number) => void) | undefined

  constructor(
    readonly req: IncomingMessage,
    readonly res: ServerResponse,
    readonly extraHeaders: readonly string[] | undefined,
    readonly failure: ForwardFailure,
    onStatus: ((status: number) => void) | undefined,
  ) {
    this.onStatus = onStatus
    this.client = req.socket
    ;(res as DirectResponse)[kDirect] = this
    res.on('close', onResponseClose) // `on`, not `once`: the response is this request's alone, and once wraps the listener
  }

  statusKnown(status: number): void {
    const told = this.onStatus
    if (told === undefined) return
    this.onStatus = undefined
    told(status)
  }

  head(status: number, reason: string, headers: string[]): void {
    this.statusKnown(status)
    this.stored = storeHead(this.res as Outgoing, status, reason, headers)
    if (!this.stored) this.res.writeHead(status, reason, headers)
    headAfterInterim(this.res)
  }

  /**
   * A chunk is held until the next one, the end of the response (then it goes out with res.end, one
   * call for a small response) or the end of what the connection read (flush).
   */
  body(chunk: Buffer): boolean {
    const held = this.held
    this.held = chunk
    return held === undefined || this.write(held)
  }

  flush(): boolean {
    const held = this.held
    if (held === undefined) return true
    this.held = undefined
    return this.write(held)
  }

  private held: Buffer | undefined = undefined
  /** The head is stored by storeHead, not yet sent. */
  private stored = false

  private write(chunk: Buffer): boolean {
    if (this.res.write(chunk)) return true
    this.res.once('drain', onResponseDrain)
    return false
  }

  end(): void {
    this.done = true
    const held = this.held
    this.held = undefined
    if (this.stored && sendWhole(this.res as Outgoing, held)) return
    if (held === undefined) this.res.end()
    else this.res.end(held)
  }

  error(err: Error & { code?: string }): void {
    if (this.done) return
    this.done = true
    this.failure(this, err)
  }
}

/** The fields of Node's ServerResponse (node:_http_outgoing, the same on Node 20 and 24) that writeHead sets or reads. */
type Outgoing = ServerResponse &
  Record<'_header' | 'statusMessage', string | null> &
  Record<
    '_headerSent' | '_hasBody' | '_last' | '_expect_continue' | '_sent100' | '_defaultKeepAlive' | 'maxRequestsOnConnectionReached',
    boolean
  > &
  Record<'_keepAliveTimeout' | '_maxRequestsPerSocket', number> & { [key: symbol]: unknown; outputData: unknown[] }

let kOutHeaders: symbol | undefined

/**
 * Stores the response head as `res.writeHead(status, reason, headers)` would, where a response has a
 * Content-Length (the common case) and nothing was set on it before: the same bytes (Date, Connection and
 * Keep-Alive as Node adds them) and the same state, without Node's per-header validation, which the
 * backend's header fields passed already (llhttp, strict, refuses control characters in values; the reason
 * phrase is checked here) and the gateway's own headers need not. False: not that
 * case, writeHead does it.
 */
function storeHead(res: Outgoing, status: number, reason: string, headers: string[]): boolean {
  kOutHeaders ??= Object.getOwnPropertySymbols(res).find((s) => s.description === 'kOutHeaders')
  if (kOutHeaders === undefined || res[kOutHeaders] != null || res._header || status < 200 || (res._expect_continue && !res._sent100))
    return false
  if (BAD_REASON.test(reason)) return false // llhttp passes control characters in the reason phrase; writeHead refuses them
  let head = `HTTP/1.1 ${status} ${reason}\r\n`
  let length = false
  let date = false
  for (let i = 0; i < headers.length; i += 2) {
    const name = headers[i]!
    if (name === 'content-length') length = true
    else if (name === 'date') date = true
    head += `${name}: ${headers[i + 1]}\r\n`
  }
  if (!length) return false // chunked framing or a body to the close: writeHead decides
  if (!date && res.sendDate) head += `Date: ${utcDate()}\r\n`
  if (res.shouldKeepAlive && !res.maxRequestsOnConnectionReached) {
    head += 'Connection: keep-alive\r\n'
    if (res._keepAliveTimeout && res._defaultKeepAlive)
      head += `Keep-Alive: timeout=${Math.floor(res._keepAliveTimeout / 1000)}${~~res._maxRequestsPerSocket > 0 ? `, max=${res._maxRequestsPerSocket}` : ''}\r\n`
  } else {
    if (!res.shouldKeepAlive) res._last = true
    head += 'Connection: close\r\n'
  }
  if (status === 204 || status === 304) res._hasBody = false
  res.statusCode = status
  res.statusMessage = reason
  res._header = `${head}\r\n`
  res._headerSent = false
  return true
}

/**
 * A whole small response (its head stored by storeHead, the body, if any, one chunk) written to the client's
 * socket as one latin1 string, with one write; res.end() then finds the head sent and nothing to write, and
 * finishes the response as usual. Without it, res.end(chunk) queues head, chunk and an empty end write on
 * the corked socket and sends them with writev. False: not that case (a pipelined response waiting for the
 * one before it, a large body, something already written), res.end does it.
 */
function sendWhole(res: Outgoing, held: Buffer | undefined): boolean {
  const socket = res.socket as (Socket & { _httpMessage?: unknown }) | null
  if (res._headerSent || socket === null || socket._httpMessage !== res || !socket.writable || res.outputData.length !== 0) return false
  if (held !== undefined && held.length > SMALL) return false
  socket.write(held === undefined ? res._header! : res._header + held.toString('latin1'), 'latin1')
  res._headerSent = true
  res.end()
  return true
}

/** 'drain' listener shared by every response: the client caught up, read the backend again. */
function onResponseDrain(this: DirectResponse): void {
  this[kDirect]?.conn?.resume()
}

/** 'close' listener shared by every response: a client that left closes its upstream connection (or leaves the queue). */
function onResponseClose(this: DirectResponse): void {
  const f = this[kDirect]
  if (f === undefined || f.done) return
  f.gone = true
  f.done = true
  f.conn?.abort()
}
