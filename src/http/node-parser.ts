/**
 * Node's own HTTP/1 parser (the llhttp binding in node:_http_common that
 * node:http uses), typed for the proxy's upstream pool (upstream.ts), and
 * the switches for a socket the parser consumes: it then reads the socket's
 * handle in C++, as node:http's server does, so a read makes no Buffer,
 * Readable push or 'data' event; the end of the stream and errors still
 * reach the socket. Pausing such a socket stops its handle, which the
 * socket's own pause() would not.
 */
import { createRequire } from 'node:module'
import type { Socket } from 'node:net'

export type Coded = Error & { code?: string }

export interface Parser {
  initialize(type: number, resource: object, maxHeaderSize: number, lenient: number): void
  execute(data: Buffer): number | Coded
  finish(): undefined | Coded
  free(): void
  consume(handle: object): void
  unconsume(): void
  [key: number]: unknown
}
type ParserClass = (new () => Parser) &
  Record<
    'REQUEST' | 'RESPONSE' | 'kOnMessageBegin' | 'kOnHeaders' | 'kOnHeadersComplete' | 'kOnBody' | 'kOnMessageComplete' | 'kOnExecute',
    number
  >
type Handle = { reading: boolean; readStop(): number; readStart(): number }
/** A net.Socket with the internals a consumed socket needs: its handle and the restart of its timeout. */
export type RawSocket = Socket & { _handle: Handle | null; _unrefTimer(): void }

// Undocumented but stable since v0.x: the binding node:http's client and server use.
export const { HTTPParser } = createRequire(import.meta.url)('_http_common') as { HTTPParser: ParserClass }

/** The parser reads `socket` from now on (call once it is connected); false: it has no handle to read. */
export function consume(parser: Parser, socket: RawSocket): boolean {
  if (socket._handle === null) return false
  parser.consume(socket._handle)
  return true
}

/** Stops reading a consumed socket until resumeReading. */
export function pauseReading(socket: RawSocket): void {
  const h = socket._handle
  if (h === null || !h.reading) return
  h.reading = false
  h.readStop()
}

export function resumeReading(socket: RawSocket): void {
  const h = socket._handle
  if (h === null || h.reading || socket.destroyed) return
  h.reading = true
  h.readStart()
}
