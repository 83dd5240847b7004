/**
 * A unary-only gRPC server on node:http2 (the gRPC-over-HTTP/2 wire protocol:
 * one length-prefixed message each way, status in the trailers). Envoy's
 * ext_authz and rate limit filters only make unary calls, and the general
 * server of @grpc/grpc-js spent about twice the CPU of the whole HTTP decision
 * per call on its own machinery (docs/benchmarks.md, "gRPC"), so the listener
 * speaks the protocol itself: a stream in, one decode, one handler call, one
 * encode, trailers out. Messages are still encoded and decoded from proto/ by
 * @grpc/proto-loader.
 *
 * What the protocol asks and how it is met: a message compressed with gzip or
 * deflate is inflated (up to the size limit); another encoding is answered
 * UNIMPLEMENTED with the ones we take; a request that is not exactly one
 * message, or does not decode, INVALID_ARGUMENT; an unknown method
 * UNIMPLEMENTED; a message over the limit RESOURCE_EXHAUSTED. A stream the
 * client resets is dropped without an answer. Nothing a peer sends can throw
 * out of a handler.
 */
import {
  constants,
  createSecureServer,
  createServer,
  type Http2SecureServer,
  type Http2Server,
  type Http2Session,
  type ServerHttp2Stream,
} from 'node:http2'
import type { AddressInfo } from 'node:net'
import { inflateSync, gunzipSync } from 'node:zlib'
import { GrpcStatus, statusName } from './status.js'

/** gRPC's default largest message (4 MiB); an ext_authz request with a buffered body stays far below. */
export const MAX_MESSAGE_BYTES = 4 * 1024 * 1024

/** A failure the handler answers with: a gRPC status other than OK and its message. */
export class GrpcFailure {
  constructor(
    readonly code: number,
    readonly details: string,
  ) {}
}

export interface UnaryMethod {
  /** Bytes → message; throws on bytes that do not decode. */
  decode(bytes: Buffer): unknown
  encode(message: unknown): Buffer
  /** Answers exactly once: a message, or a GrpcFailure. */
  handle(request: unknown, answer: (response: object | GrpcFailure) => void): void
}

export interface UnaryServerOptions {
  /** Full method path (`/package.Service/Method`) → method. */
  methods: ReadonlyMap<string, UnaryMethod>
  /** Every answered call, with its method path (or '' when unknown) and status name. */
  counted(method: string, code: string): void
  /** A handler threw: a bug, answered INTERNAL and logged here. */
  failed(method: string, err: unknown): void
  tls?: { cert: Buffer; key: Buffer; ca?: Buffer }
}

const ACCEPT_ENCODING = 'identity,deflate,gzip'
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
const gone = (stream: ServerHttp2Stream): boolean => stream.closed || stream.destroyed || stream.headersSent

function fail(stream: ServerHttp2Stream, code: number, details: string): void {
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

function send(stream: ServerHttp2Stream, payload: Buffer): void {
  if (gone(stream)) return
  const frame = Buffer.allocUnsafe(5 + payload.length)
  frame[0] = 0
  frame.writeUInt32BE(payload.length, 1)
  payload.copy(frame, 5)
  stream.respond(OK_HEADERS, { waitForTrailers: true })
  stream.once('wantTrailers', () => stream.sendTrailers(OK_TRAILERS))
  stream.end(frame)
}

/** The one message of a unary request, inflated; or why it is not one. */
function message(body: Buffer, encoding: string | undefined): Buffer | GrpcFailure {
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

export interface UnaryServer {
  server: Http2Server | Http2SecureServer
  /** Stops accepting; in-flight calls finish (GOAWAY), sessions still open after `timeoutMs` are destroyed. */
  shutdown(timeoutMs: number): Promise<void>
}

export function createUnaryServer(o: UnaryServerOptions): UnaryServer {
  const server = o.tls
    ? createSecureServer({ cert: o.tls.cert, key: o.tls.key, ca: o.tls.ca, requestCert: !!o.tls.ca, rejectUnauthorized: !!o.tls.ca })
    : createServer()
  const sessions = new Set<Http2Session>()
  server.on('session', (s: Http2Session) => {
    sessions.add(s)
    s.once('close', () => sessions.delete(s))
  })
  // A peer that breaks the protocol loses its own session; the listener keeps serving.
  server.on('sessionError', () => {})
  server.on('stream', (stream: ServerHttp2Stream, headers) => {
    // A reset by the client (Envoy's timeout, a cancelled call) emits 'error' on the stream: nothing to answer then.
    stream.on('error', () => {})
    const path = headers[':path'] ?? ''
    const method = o.methods.get(path)
    const type = headers['content-type']
    if (headers[':method'] !== 'POST' || typeof type !== 'string' || !type.startsWith('application/grpc')) {
      o.counted('', 'UNIMPLEMENTED')
      // The body is read and dropped: a stream whose request side is never consumed never closes (nor would shutdown).
      stream.resume()
      if (gone(stream)) return
      stream.respond({ ':status': 415 }, { endStream: true })
      if (!stream.readableEnded) stream.close(constants.NGHTTP2_NO_ERROR)
      return
    }
    if (method === undefined) {
      o.counted('', 'UNIMPLEMENTED')
      stream.resume()
      return fail(stream, GrpcStatus.UNIMPLEMENTED, `unknown method ${path.slice(0, 200)}`)
    }
    const name = path.slice(1)
    const answer = (code: number, details: string): void => {
      o.counted(name, statusName(code))
      fail(stream, code, details)
    }
    let first: Buffer | undefined
    let parts: Buffer[] | undefined
    let size = 0
    let tooBig = false
    stream.on('data', (chunk: Buffer) => {
      if (tooBig) return // answered already; the rest is read and dropped
      size += chunk.length
      if (size > MAX_MESSAGE_BYTES + 5) {
        tooBig = true
        first = parts = undefined
        return answer(GrpcStatus.RESOURCE_EXHAUSTED, `message larger than ${MAX_MESSAGE_BYTES} bytes`)
      }
      if (first === undefined) first = chunk
      else (parts ??= [first]).push(chunk)
    })
    stream.on('end', () => {
      if (tooBig || gone(stream)) return // answered, or reset by the client before its message was whole
      const body = parts ? Buffer.concat(parts) : (first ?? Buffer.alloc(0))
      const bytes = message(body, headers['grpc-encoding'] as string | undefined)
      if (bytes instanceof GrpcFailure) return answer(bytes.code, bytes.details)
      let request: unknown
      try {
        request = method.decode(bytes)
      } catch (err) {
        return answer(GrpcStatus.INVALID_ARGUMENT, `request does not decode: ${(err as Error).message}`)
      }
      let answered = false
      // A handler may answer later (after a store call): whatever throws then is caught here too, never by the process.
      const internal = (err: unknown): void => {
        o.failed(name, err)
        if (answered) return
        answered = true
        answer(GrpcStatus.INTERNAL, 'internal error')
      }
      try {
        method.handle(request, (res) => {
          if (answered) return
          try {
            if (res instanceof GrpcFailure) {
              answered = true
              return answer(res.code, res.details)
            }
            const bytes = method.encode(res)
            answered = true
            o.counted(name, 'OK')
            send(stream, bytes)
          } catch (err) {
            internal(err)
          }
        })
      } catch (err) {
        internal(err)
      }
    })
  })
  return {
    server,
    shutdown: (timeoutMs) =>
      new Promise<void>((resolve) => {
        server.close(() => resolve())
        for (const s of sessions) s.close()
        const force = setTimeout(() => {
          for (const s of sessions) s.destroy()
        }, timeoutMs)
        force.unref()
        server.once('close', () => clearTimeout(force))
      }),
  }
}

/** Listens on `port` at `host`, or on an already bound socket's descriptor. */
export function listen(server: Http2Server | Http2SecureServer, at: { port: number; host: string } | { fd: number }): Promise<AddressInfo> {
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(at, () => {
      server.off('error', reject)
      resolve(server.address() as AddressInfo)
    })
  })
}
