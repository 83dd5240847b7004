/**
 * The response side of a proxied LLM call: every byte passes through the
 * LLM exchange (counted, maybe cut) on its way to the client; a stream's
 * events are passed on whole, as each ends (the exchange holds the bytes of
 * the one not yet ended, within FAIRVISOR_LLM_MAX_EVENT_BYTES).
 * A body the upstream compressed anyway (the gateway asks for `identity`)
 * is decoded as it passes with node:zlib, so counting, cutting and settling
 * see the text; the client then gets the decoded bytes. When the gateway
 * may change the body's length (a stream it may cut, decoded bytes) the
 * upstream's Content-Length is dropped and Node frames the response itself
 * (chunked on HTTP/1.1, close-delimited on HTTP/1.0), so a cut never leaves
 * a client waiting for bytes that will not come.
 */
import type { ServerResponse } from 'node:http'
import * as zlib from 'node:zlib'
import type { Transform } from 'node:stream'
import { StreamCutError } from '../errors.js'
import type { LlmExchange } from '../llm/exchange.js'

/** The forwarding state the relay drives (the proxy's per-request handler). */
export interface RelayHost {
  readonly res: ServerResponse
  /** Drop the upstream call. */
  abort(err: Error): void
  /** Read the upstream again after a pause. */
  resume(): void
  cut: boolean
  done: boolean
}

type Zstd = { createZstdDecompress?: (o?: object) => Transform }

/** A streaming decoder for one Content-Encoding value, undefined when there is none for it. */
function decoderFor(encoding: string | undefined): Transform | undefined {
  const sync = { flush: zlib.constants.Z_SYNC_FLUSH, finishFlush: zlib.constants.Z_SYNC_FLUSH }
  switch (encoding?.trim()) {
    case 'gzip':
    case 'x-gzip':
      return zlib.createGunzip(sync)
    case 'deflate':
      return zlib.createInflate(sync)
    case 'br':
      return zlib.createBrotliDecompress({
        flush: zlib.constants.BROTLI_OPERATION_FLUSH,
        finishFlush: zlib.constants.BROTLI_OPERATION_FLUSH,
      })
    case 'zstd':
      return (zlib as Zstd).createZstdDecompress?.() // Node ≥ 22.15 only
  }
  return undefined
}

/** First value of a response header in undici's raw buffer list (lower-cased). */
export function rawValue(raw: Buffer[], lower: string): string | undefined {
  for (let i = 0; i < raw.length; i += 2) {
    const k = raw[i]!
    if (k.length === lower.length && k.toString('latin1').toLowerCase() === lower) return raw[i + 1]!.toString('latin1').toLowerCase()
  }
  return undefined
}

function without(raw: Buffer[], names: readonly string[]): Buffer[] {
  const out: Buffer[] = []
  for (let i = 0; i < raw.length; i += 2) {
    if (names.includes(raw[i]!.toString('latin1').toLowerCase())) continue
    out.push(raw[i]!, raw[i + 1]!)
  }
  return out
}

export class LlmRelay {
  private decoder: Transform | undefined

  constructor(
    private readonly f: RelayHost,
    private readonly tap: LlmExchange,
  ) {}

  /** Reads the response head; returns the raw headers to send the client. */
  head(status: number, raw: Buffer[], path: string): Buffer[] {
    const encoding = rawValue(raw, 'content-encoding')
    this.decoder = encoding === undefined || encoding === 'identity' ? undefined : decoderFor(encoding)
    const mayCut = this.tap.headers(status, rawValue(raw, 'content-type'), this.decoder === undefined ? encoding : undefined, path)
    if (this.decoder !== undefined) {
      const d = this.decoder
      d.on('data', (c: Buffer) => {
        if (!this.deliver(c)) d.pause()
      })
      d.on('error', (err) => this.broken(err))
      return without(raw, ['content-encoding', 'content-length'])
    }
    return mayCut ? without(raw, ['content-length']) : raw
  }

  /** One upstream chunk (undici onResponseData): false pauses the upstream until the client (or decoder) drains. */
  data(chunk: Buffer): boolean {
    const d = this.decoder
    if (d === undefined) {
      if (this.deliver(chunk)) return true
      if (!this.f.cut) this.f.res.once('drain', () => this.f.resume())
      return false
    }
    if (this.f.cut || d.destroyed) return false
    if (d.write(chunk)) return true
    d.once('drain', () => this.f.resume())
    return false
  }

  /** The upstream body ended. */
  complete(): void {
    const d = this.decoder
    if (d === undefined) return this.finish()
    if (this.f.cut || d.destroyed) return
    d.once('end', () => this.finish())
    d.end()
  }

  private finish(): void {
    if (this.f.cut) return
    this.f.done = true
    const rest = this.tap.rest() // a last event the upstream never ended: passed on as it came
    this.tap.end(true)
    if (rest === undefined) this.f.res.end()
    else this.f.res.end(rest)
  }

  /** Decoded (or plain) bytes to the client through the exchange; false: the client is full, or the stream was cut. */
  private deliver(chunk: Buffer): boolean {
    if (this.f.cut) return false
    const out = this.tap.data(chunk)
    if (this.tap.ending === undefined) {
      if (out === undefined || this.f.res.write(out)) return true
      // Backpressure from the client: the decoder waits for it (without a decoder, the caller does).
      if (this.decoder !== undefined) this.f.res.once('drain', () => this.decoder?.resume())
      return false
    }
    // The stream ends here (max_completion_tokens passed, or an upstream event not passed on): the events so far,
    // the closing events, then end and drop the upstream call.
    this.f.cut = true
    this.f.done = true
    if (out !== undefined) this.f.res.write(out)
    this.f.res.end(this.tap.closing())
    this.decoder?.destroy()
    this.f.abort(new StreamCutError())
    return false
  }

  /** Bytes that do not decode: the client has a truncated body, which is the honest signal; settles on what passed. */
  private broken(err: Error): void {
    if (this.f.cut || this.f.done) return
    this.f.done = true
    this.tap.end(false)
    this.f.res.destroy(err)
    this.f.abort(err)
  }
}
