/**
 * One proxied request as an undici dispatch handler, on undici 7's handler
 * API (onRequestStart, onResponseStart, …): the response head is copied from
 * undici's raw buffers, the body streams to the client with backpressure
 * (the dispatch controller is paused until the client drains), a client that
 * leaves cancels the upstream call, and an LLM call's response goes through
 * its relay (llm-relay.ts).
 *
 * undici's older core callbacks (onConnect, onHeaders, …) skip an adapter
 * that costs about 1-5 % of the proxied allow path (docs/benchmarks.md), but
 * they are deprecated: a proxy on an API undici is removing would break on an
 * upgrade, so the current API it is.
 */
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http'
import type { Duplex } from 'node:stream'
import type { Dispatcher } from 'undici'
import { ClientClosedError } from '../errors.js'
import type { LlmExchange } from '../llm/exchange.js'
import { downstreamFromParsed, downstreamHeaders } from './forward-headers.js'
import { LlmRelay, type RelayHost } from './llm-relay.js'
import { upstreamEnd, upstreamStatus } from './spans.js'
import type { Span } from '../observe/tracing.js'

const kForwarding = Symbol('forwarding')
type ForwardedResponse = ServerResponse & { [kForwarding]?: Forwarding }

/** A proxied request as the failure path sees it (this file's Forwarding, or direct-forwarding.ts's). */
export interface Forwarded {
  readonly req: IncomingMessage
  readonly res: ServerResponse
  readonly client: Duplex
  statusKnown(status: number): void
}

/** How a forwarding that failed is answered (the proxy's 502/504 or a truncated body). */
export type ForwardFailure = (f: Forwarded, err: Error & { code?: string }) => void

/**
 * Puts a response head behind an interim response queued before it. node:http writes the 100 Continue of
 * an `Expect: 100-continue` request before its handler runs; on a pipelined request whose turn has not come,
 * that 100 waits in the response's output queue, and the first body chunk sent as a Buffer puts the head in
 * front of the queue (OutgoingMessage#_send): `head, 100 Continue, body`, which the client cannot parse.
 * Sent at once as a string, the head queues behind the 100 (Node 20 and 24 alike).
 */
export function headAfterInterim(res: ServerResponse): void {
  // outputData is node:http's internal queue (Node 20 and 24); a runtime without it has nothing to reorder.
  if (((res as ServerResponse & { outputData?: unknown[] }).outputData?.length ?? 0) > 0) res.flushHeaders()
}

/** undici hands the handler the response head as it arrived (raw buffers) on the controller; the guard proves it without a cast. */
function isBufferList(v: unknown): v is Buffer[] {
  return Array.isArray(v) && (v.length === 0 || Buffer.isBuffer(v[0]))
}

/** The head as raw [name, value, …] buffers: the controller's own list, else (never on a Pool) rebuilt from the parsed object. */
function rawHeadersOf(c: Dispatcher.DispatchController, parsed: IncomingHttpHeaders): Buffer[] {
  if (isBufferList(c.rawHeaders)) return c.rawHeaders
  const out: Buffer[] = []
  for (const name in parsed) {
    const v = parsed[name]
    for (const one of Array.isArray(v) ? v : [v ?? '']) out.push(Buffer.from(name, 'latin1'), Buffer.from(one, 'latin1'))
  }
  return out
}

/**
 * A class with prototype methods instead of a closure-built object keeps the
 * per-request allocation to one small object.
 */
export class Forwarding implements Dispatcher.DispatchHandler, RelayHost {
  controller: Dispatcher.DispatchController | undefined = undefined
  done = false
  /** Set when an LLM stream was ended here (max_completion_tokens): the upstream abort that follows is expected. */
  cut = false
  /** An LLM call's response side (counts, may cut, decodes). */
  relay: LlmRelay | undefined = undefined
  /** A traced request's upstream span (http/spans.ts), ended with the upstream call. */
  span: Span | undefined = undefined
  /** Told the response's status once (count_statuses / refund_statuses); cleared when told. */
  private onStatus: ((status: number) => void) | undefined
  /** The client socket, kept because undici may detach req.socket when it destroys the body. */
  readonly client: Duplex

  constructor(
    readonly req: IncomingMessage,
    readonly res: ServerResponse,
    readonly extraHeaders: readonly string[] | undefined,
    readonly failure: ForwardFailure,
    readonly tap: LlmExchange | undefined,
    onStatus?: (status: number) => void,
  ) {
    this.onStatus = onStatus
    this.client = req.socket
    ;(res as ForwardedResponse)[kForwarding] = this
    res.once('close', onResponseClose)
  }

  resume(): void {
    this.controller?.resume()
  }

  abort(err: Error): void {
    this.controller?.abort(err)
  }

  /** The status the client gets: the backend's, or the 502/504 the proxy answers when it failed. */
  statusKnown(status: number): void {
    const told = this.onStatus
    if (told === undefined) return
    this.onStatus = undefined
    told(status)
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller
    if (this.res.destroyed) controller.abort(new ClientClosedError())
  }

  onResponseStart(controller: Dispatcher.DispatchController, statusCode: number, headers: IncomingHttpHeaders, statusText?: string): void {
    if (statusCode < 200) return // interim responses are not relayed
    this.statusKnown(statusCode)
    if (this.span !== undefined) upstreamStatus(this.span, statusCode)
    if (this.tap === undefined) this.res.writeHead(statusCode, statusText, downstreamFromParsed(headers, this.extraHeaders))
    else {
      // An LLM call's head may be rewritten by its relay (framing, encoding), on the raw list.
      this.relay = new LlmRelay(this, this.tap)
      const raw = this.relay.head(statusCode, rawHeadersOf(controller, headers), this.req.url ?? '')
      this.res.writeHead(statusCode, statusText, downstreamHeaders(raw, this.extraHeaders))
    }
    headAfterInterim(this.res)
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.relay !== undefined) {
      if (!this.relay.data(chunk)) controller.pause()
      return
    }
    if (this.res.write(chunk)) return
    // Backpressure: undici stops reading the backend until the client drains.
    controller.pause()
    this.res.once('drain', onResponseDrain)
  }

  onResponseEnd(): void {
    if (this.span !== undefined) upstreamEnd(this.span, null)
    if (this.relay !== undefined) return this.relay.complete()
    this.done = true
    this.tap?.end(true)
    this.res.end()
  }

  onResponseError(_controller: Dispatcher.DispatchController, err: Error): void {
    if (this.span !== undefined) upstreamEnd(this.span, this.cut ? null : err)
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
