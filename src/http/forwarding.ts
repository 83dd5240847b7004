/**
 * One proxied request as an undici dispatch handler: the response head is
 * copied from undici's raw buffers, the body streams to the client with
 * backpressure, a client that leaves cancels the upstream call, and an LLM
 * call's response goes through its relay (llm-relay.ts).
 *
 * The handler speaks undici's core protocol (onConnect, onHeaders, onData,
 * onComplete, onError), the one undici's Client itself calls. undici 7's
 * controller API (onRequestStart, onResponseStart, …) is an adapter over it
 * (UnwrapHandler): per request it allocates a wrapper and a controller with
 * private fields, and parses the response head and the trailers into objects
 * that a proxy copying raw buffers never reads (docs/benchmarks.md, Single
 * thread against round 1).
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Duplex } from 'node:stream'
import type { Dispatcher } from 'undici'
import { ClientClosedError } from '../errors.js'
import type { LlmExchange } from '../llm/exchange.js'
import { downstreamHeaders } from './forward-headers.js'
import { LlmRelay, type RelayHost } from './llm-relay.js'

const kForwarding = Symbol('forwarding')
type ForwardedResponse = ServerResponse & { [kForwarding]?: Forwarding }

/** How a forwarding that failed is answered (the proxy's 502/504 or a truncated body). */
export type ForwardFailure = (f: Forwarding, err: Error & { code?: string }) => void

/**
 * A class with prototype methods instead of a closure-built object keeps the
 * per-request allocation to one small object. Backpressure: onData returns
 * false (undici stops reading the backend) until the client drains.
 */
export class Forwarding implements Dispatcher.DispatchHandler, RelayHost {
  /** undici's abort of this request, known once it is on a connection. */
  private cancel: ((err?: Error) => void) | undefined = undefined
  /** undici's resume of the backend read, known once the response head arrived. */
  private proceed: (() => void) | undefined = undefined
  done = false
  /** Set when an LLM stream was ended here (max_completion_tokens): the upstream abort that follows is expected. */
  cut = false
  /** An LLM call's response side (counts, may cut, decodes). */
  relay: LlmRelay | undefined = undefined
  /** The client socket, kept because undici may detach req.socket when it destroys the body. */
  readonly client: Duplex

  constructor(
    readonly req: IncomingMessage,
    readonly res: ServerResponse,
    readonly extraHeaders: readonly string[] | undefined,
    readonly failure: ForwardFailure,
    readonly tap: LlmExchange | undefined,
  ) {
    this.client = req.socket
    ;(res as ForwardedResponse)[kForwarding] = this
    res.once('close', onResponseClose)
  }

  resume(): void {
    this.proceed?.()
  }

  abort(err: Error): void {
    this.cancel?.(err)
  }

  onConnect(abort: (err?: Error) => void): void {
    this.cancel = abort
    if (this.res.destroyed) abort(new ClientClosedError())
  }

  onHeaders(statusCode: number, raw: Buffer[], resume: () => void, statusText: string): boolean {
    if (statusCode < 200) return true // interim responses are not relayed
    this.proceed = resume
    let head = raw
    if (this.tap !== undefined) {
      this.relay = new LlmRelay(this, this.tap)
      head = this.relay.head(statusCode, raw, this.req.url ?? '')
    }
    this.res.writeHead(statusCode, statusText, downstreamHeaders(head, this.extraHeaders))
    return true
  }

  onData(chunk: Buffer): boolean {
    if (this.relay !== undefined) return this.relay.data(chunk)
    if (this.res.write(chunk)) return true
    this.res.once('drain', onResponseDrain)
    return false
  }

  onComplete(): void {
    if (this.relay !== undefined) return this.relay.complete()
    this.done = true
    this.tap?.end(true)
    this.res.end()
  }

  onError(err: Error): void {
    if (this.cut) return
    this.done = true
    this.tap?.end(false)
    this.failure(this, err)
  }
}

/** 'drain' listener shared by every response (no closure per request): the client caught up, read the backend again. */
function onResponseDrain(this: ForwardedResponse): void {
  this[kForwarding]?.resume()
}

/** 'close' listener shared by every response (no closure per request): a client that left cancels its upstream request. */
function onResponseClose(this: ForwardedResponse): void {
  const f = this[kForwarding]
  if (f === undefined || f.done) return
  f.tap?.end(false) // an LLM call the client left settles on what was streamed
  f.abort(new ClientClosedError())
}
