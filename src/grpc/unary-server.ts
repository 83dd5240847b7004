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
 * UNIMPLEMENTED; a message over the limit RESOURCE_EXHAUSTED; a call past its
 * grpc-timeout DEADLINE_EXCEEDED. A stream the client resets is dropped
 * without an answer. Nothing a peer sends can throw out of a handler.
 *
 * What peers can hold open is bounded: streams per connection (the SETTINGS
 * the server announces, which nghttp2 enforces), the bytes of requests not
 * yet whole, all streams together (byte-budget.ts): the stream whose bytes
 * would pass the budget is answered RESOURCE_EXHAUSTED and lets its bytes go;
 * how long a call may stay unanswered (its grpc-timeout, at most the stream
 * timeout: DEADLINE_EXCEEDED), and how long a connection may stay without a
 * stream (the idle timeout: GOAWAY, then closed).
 */
import {
  constants,
  createSecureServer,
  createServer,
  type Http2SecureServer,
  type Http2Server,
  type IncomingHttpHeaders,
  type Http2Session,
  type ServerHttp2Stream,
} from 'node:http2'
import type { Socket } from 'node:net'
import { GrpcStatus, statusName } from './status.js'
import { type ByteBudget, HeldBody } from './byte-budget.js'
import { deadlineMs, fail, gone, GrpcFailure, MAX_MESSAGE_BYTES, message, send } from './wire.js'

export interface UnaryMethod {
  /** A refusal read from the bytes before they are decoded (a bound that decoding would already cost too much to check after). */
  refuse?(bytes: Buffer): GrpcFailure | undefined
  /** Bytes → message; throws on bytes that do not decode. */
  decode(bytes: Buffer): unknown
  encode(message: unknown): Buffer
  /**
   * Answers exactly once: a message, or a GrpcFailure. `gone(fn)`: `fn` runs when the call ends
   * without the handler's answer (reset by the client, its deadline, its session destroyed). `headers`: the call's.
   */
  handle(
    request: unknown,
    answer: (response: object | GrpcFailure) => void,
    gone: (fn: () => void) => void,
    headers: IncomingHttpHeaders,
  ): void
}

export interface UnaryServerOptions {
  /** Full method path (`/package.Service/Method`) → method. */
  methods: ReadonlyMap<string, UnaryMethod>
  /** Every answered call, with its method path (or '' when unknown) and status name. */
  counted(method: string, code: string): void
  /** A handler threw: a bug, answered INTERNAL and logged here. */
  failed(method: string, err: unknown): void
  tls?: { cert: Buffer; key: Buffer; ca?: Buffer }
  /** HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS the listener announces (and nghttp2 enforces) per connection. */
  maxConcurrentStreams: number
  /** What the streams' unfinished requests may hold together. */
  budget: ByteBudget
  /** A connection with no open stream for this long is closed. */
  idleTimeoutMs: number
  /** The longest a call may stay unanswered, whatever its grpc-timeout (none, or longer). */
  streamTimeoutMs: number
}

export interface UnaryServer {
  server: Http2Server | Http2SecureServer
  /** Stops accepting; in-flight calls finish (GOAWAY), each connection closes once its answers are written, what is still open after `timeoutMs` is destroyed. */
  shutdown(timeoutMs: number): Promise<void>
}

export function createUnaryServer(o: UnaryServerOptions): UnaryServer {
  const settings = { maxConcurrentStreams: o.maxConcurrentStreams }
  const server = o.tls
    ? createSecureServer({
        settings,
        cert: o.tls.cert,
        key: o.tls.key,
        ca: o.tls.ca,
        requestCert: !!o.tls.ca,
        rejectUnauthorized: !!o.tls.ca,
        // A peer that never finishes its handshake has no session yet for the idle timer to end.
        handshakeTimeout: Math.min(o.idleTimeoutMs, 120_000),
      })
    : createServer({ settings })
  const sessions = new Set<Http2Session>()
  /** Per session: its open streams, and the timer that ends it once it has had none for idleTimeoutMs. */
  const idle = new Map<Http2Session, { open: number; timer: NodeJS.Timeout }>()
  server.on('session', (s: Http2Session) => {
    sessions.add(s)
    // destroy(): GOAWAY(NO_ERROR), then the socket is closed without waiting for the peer (a silent one never would).
    const timer = setTimeout(() => state.open === 0 && s.destroy(), o.idleTimeoutMs).unref()
    const state = { open: 0, timer }
    idle.set(s, state)
    s.once('close', () => {
      clearTimeout(timer)
      idle.delete(s)
      sessions.delete(s)
    })
  })
  // A peer that breaks the protocol loses its own session; the listener keeps serving.
  server.on('sessionError', () => {})
  server.on('stream', (stream: ServerHttp2Stream, headers) => {
    // A reset by the client (Envoy's timeout, a cancelled call) emits 'error' on the stream: nothing to answer then.
    stream.on('error', () => {})
    const session = idle.get(stream.session!)
    if (session) session.open++
    // Every way a stream ends closes it: the last one to close starts its connection's idle time.
    stream.once('close', () => {
      if (session && --session.open === 0) session.timer.refresh()
    })
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
    // One answer per call, whichever comes first: the handler's, a refusal, the deadline.
    let answered = false
    const answer = (code: number, details: string): void => {
      if (answered) return
      answered = true
      o.counted(name, statusName(code))
      fail(stream, code, details)
    }
    const body = new HeldBody(o.budget, MAX_MESSAGE_BYTES + 5)
    // Without a grpc-timeout, or with a longer one, the stream timeout: a request never finished cannot hold its stream for good.
    const deadline = Math.min(deadlineMs(headers['grpc-timeout']) ?? o.streamTimeoutMs, o.streamTimeoutMs)
    const timer = setTimeout(answer, deadline, GrpcStatus.DEADLINE_EXCEEDED, 'deadline exceeded')
    // Every way a stream ends closes it (answered, reset by the client, its session destroyed): what it held goes back.
    stream.once('close', () => {
      clearTimeout(timer)
      body.release()
    })
    stream.on('data', (chunk: Buffer) => {
      if (answered) return // answered already; the rest is read and dropped
      const kept = body.add(chunk)
      if (kept === 'too-large') answer(GrpcStatus.RESOURCE_EXHAUSTED, `message larger than ${MAX_MESSAGE_BYTES} bytes`)
      else if (kept === 'budget') answer(GrpcStatus.RESOURCE_EXHAUSTED, 'the listener holds as many unfinished request bytes as it may')
    })
    stream.on('end', () => {
      if (answered || gone(stream)) return // answered, or reset by the client before its message was whole
      const bytes = message(body.take(), headers['grpc-encoding'] as string | undefined)
      if (bytes instanceof GrpcFailure) return answer(bytes.code, bytes.details)
      const refused = method.refuse?.(bytes)
      if (refused !== undefined) return answer(refused.code, refused.details)
      let request: unknown
      try {
        request = method.decode(bytes)
      } catch (err) {
        return answer(GrpcStatus.INVALID_ARGUMENT, `request does not decode: ${(err as Error).message}`)
      }
      // A handler may answer later (after a store call): whatever throws then is caught here too, never by the process.
      const internal = (err: unknown): void => {
        o.failed(name, err)
        answer(GrpcStatus.INTERNAL, 'internal error')
      }
      // A handler that holds its answer (a request held for its debt) hears when the call ends without it.
      const ended = (fn: () => void): void =>
        void stream.once('close', () => {
          if (!handled) fn()
        })
      let handled = false
      try {
        method.handle(
          request,
          (res) => {
            handled = true
            if (answered) return
            try {
              if (res instanceof GrpcFailure) return answer(res.code, res.details)
              const bytes = method.encode(res)
              answered = true
              o.counted(name, 'OK')
              send(stream, bytes)
            } catch (err) {
              internal(err)
            }
          },
          ended,
          headers,
        )
      } catch (err) {
        internal(err)
      }
    })
  })
  // The sockets, for shutdown (a session's own socket is not ours to destroy): each connection's TCP socket, and with
  // TLS the TLS socket its session runs on. A TLS client that never finishes its handshake has only the first.
  const sockets = new Set<Socket>()
  const track = (sock: Socket): void => {
    sockets.add(sock)
    sock.once('close', () => sockets.delete(sock))
  }
  server.on('connection', track)
  if (o.tls) server.on('secureConnection', track)
  return {
    server,
    shutdown: (timeoutMs) =>
      new Promise<void>((resolve) => {
        server.close(() => resolve())
        // A closed session ends its socket once its last stream is done, then waits for the peer to close its side:
        // a peer that keeps the connection open (an idle client, a flood's) would hold the drain to the deadline.
        // Our side written out (GOAWAY, every answer) is all there is to wait for.
        for (const sock of sockets) {
          if (sock.writableFinished) sock.destroy()
          else sock.once('finish', () => sock.destroy())
        }
        for (const s of sessions) s.close()
        // Streams still open at the deadline (a request never finished) go with their sockets. Not session.destroy():
        // after close() it only ends the socket, and waits for that same peer.
        const force = setTimeout(() => {
          for (const sock of sockets) sock.destroy()
        }, timeoutMs)
        force.unref()
        server.once('close', () => clearTimeout(force))
      }),
  }
}
