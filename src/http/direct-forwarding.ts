/**
 * One proxied request on the proxy's own upstream pool (upstream.ts): the
 * response head and body go to the client as they arrive, with backpressure
 * (the connection stops reading until the client drains), and a client that
 * leaves closes the upstream connection, which cancels the request there.
 * The counterpart of forwarding.ts for requests without a body or LLM rule.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Duplex } from 'node:stream'
import type { ForwardFailure } from './forwarding.js'
import type { UpstreamConn, UpstreamExchange } from './upstream.js'

const kDirect = Symbol('direct-forwarding')
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
    this.res.writeHead(status, reason, headers)
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

  private write(chunk: Buffer): boolean {
    if (this.res.write(chunk)) return true
    this.res.once('drain', onResponseDrain)
    return false
  }

  end(): void {
    this.done = true
    const held = this.held
    this.held = undefined
    if (held === undefined) this.res.end()
    else this.res.end(held)
  }

  error(err: Error & { code?: string }): void {
    if (this.done) return
    this.done = true
    this.failure(this, err)
  }
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
