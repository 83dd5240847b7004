/**
 * gRPC over HTTP/2 at the byte level, for the unary server: the one message
 * of a request (length prefix, compression), and the two ways an answer is
 * written (a message with trailers, or trailers only).
 */
import { constants, type ServerHttp2Stream } from 'node:http2'
import { gunzipSync, inflateSync } from 'node:zlib'
import { GrpcStatus } from './status.js'

/** gRPC's default largest message (4 MiB); an ext_authz request with a buffered body stays far below. */
export const MAX_MESSAGE_BYTES = 4 * 1024 * 1024

/** A failure the handler answers with: a gRPC status other than OK and its message. */
export class GrpcFailure {
  constructor(
    readonly code: number,
    readonly details: string,
  ) {}
}

export const ACCEPT_ENCODING = 'identity,deflate,gzip'
const OK_HEADERS = { ':status': 200, 'content-type': 'application/grpc', 'grpc-accept-encoding': ACCEPT_ENCODING }
const OK_TRAILERS = { 'grpc-status': '0' }

/** grpc-message is percent-encoded (the protocol allows printable ASCII except '%' as is). */
function percentEncode(text: string): string {
  return /^[\x20-\x24\x26-\x7e]*$/.test(text) ? text : encodeURIComponent(text)
}

/**
 * A stream the client reset is `closed` before it is `destroyed`, and
 * responding on it throws: such a call has nobody left to answer.
 */
export const gone = (stream: ServerHttp2Stream): boolean => stream.closed || stream.destroyed || stream.headersSent

export function fail(stream: ServerHttp2Stream, code: number, details: string): void {
  if (gone(stream)) return
  // Trailers-only: one HEADERS frame ends the stream with the status.
  stream.respond(
    {
      ':status': 200,
      'content-type': 'application/grpc',
      'grpc-accept-encoding': ACCEPT_ENCODING,
      'grpc-status': String(code),
      'grpc-message': percentEncode(details),
    },
    { endStream: true },
  )
  // Answered before the request ended (too large, not gRPC): RST_STREAM(NO_ERROR) tells the client to stop sending,
  // as the protocol allows; otherwise its half of the stream stays open and holds the session (and a drain) up.
  if (!stream.readableEnded) stream.close(constants.NGHTTP2_NO_ERROR)
}

/** What `grpc-timeout` (1 to 8 digits and a unit: Hours, Minutes, Seconds, milli-, micro-, nanoseconds) grants, in ms. */
const TIMEOUT_UNIT_MS: Record<string, number> = { H: 3_600_000, M: 60_000, S: 1000, m: 1, u: 1e-3, n: 1e-6 }

/** The call's deadline from now in ms (at most what a timer can wait); undefined when the client set none or set it wrong. */
export function deadlineMs(header: string | string[] | undefined): number | undefined {
  const m = typeof header === 'string' ? /^(\d{1,8})([HMSmun])$/.exec(header) : null
  return m ? Math.min(Number(m[1]) * TIMEOUT_UNIT_MS[m[2]!]!, 2 ** 31 - 1) : undefined
}

/** `payload` as one length-prefixed gRPC message: flag (1: compressed), 4-byte big-endian length, the bytes. */
export function grpcFrame(payload: Buffer, compressed = false): Buffer {
  const frame = Buffer.allocUnsafe(5 + payload.length)
  frame[0] = compressed ? 1 : 0
  frame.writeUInt32BE(payload.length, 1)
  payload.copy(frame, 5)
  return frame
}

export function send(stream: ServerHttp2Stream, payload: Buffer): void {
  if (gone(stream)) return
  const frame = grpcFrame(payload)
  stream.respond(OK_HEADERS, { waitForTrailers: true })
  stream.once('wantTrailers', () => stream.sendTrailers(OK_TRAILERS))
  stream.end(frame)
}

/** The one message of a unary request, inflated; or why it is not one. */
export function message(body: Buffer, encoding: string | undefined): Buffer | GrpcFailure {
  if (body.length < 5) return new GrpcFailure(GrpcStatus.INVALID_ARGUMENT, 'a unary call carries exactly one message; none arrived')
  const length = body.readUInt32BE(1)
  if (body.length !== 5 + length)
    return new GrpcFailure(GrpcStatus.INVALID_ARGUMENT, 'a unary call carries exactly one message; the frames do not add up to one')
  const bytes = body.subarray(5)
  if (body[0] === 0) return bytes
  if (body[0] !== 1) return new GrpcFailure(GrpcStatus.INVALID_ARGUMENT, `message flag ${body[0]} is not 0 or 1`)
  try {
    const opts = { maxOutputLength: MAX_MESSAGE_BYTES }
    if (encoding === 'gzip') return gunzipSync(bytes, opts)
    if (encoding === 'deflate') return inflateSync(bytes, opts)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE')
      return new GrpcFailure(GrpcStatus.RESOURCE_EXHAUSTED, `message inflates to more than ${MAX_MESSAGE_BYTES} bytes`)
    return new GrpcFailure(GrpcStatus.INVALID_ARGUMENT, `compressed message does not inflate: ${(err as Error).message}`)
  }
  return new GrpcFailure(GrpcStatus.UNIMPLEMENTED, `message encoding "${encoding ?? 'identity'}" is not one of ${ACCEPT_ENCODING}`)
}
