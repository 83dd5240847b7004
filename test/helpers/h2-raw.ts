/**
 * HTTP/2 at the frame level over a plain socket, for tests of what a peer
 * that does not play by the server's SETTINGS gets: node:http2's client (like
 * any nghttp2 client) holds its own streams to the server's
 * SETTINGS_MAX_CONCURRENT_STREAMS, so only a client of this kind can show the
 * server enforcing it. Headers are HPACK literals without indexing (RFC 7541
 * 6.2.2), which every decoder takes.
 */
import { createConnection, type Socket } from 'node:net'

export const FRAME = { HEADERS: 1, RST_STREAM: 3, SETTINGS: 4, PING: 6, GOAWAY: 7 } as const
const END_HEADERS = 0x4
const ACK = 0x1

export interface Frame {
  type: number
  flags: number
  stream: number
  payload: Buffer
}

function frame(type: number, flags: number, stream: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  const head = Buffer.alloc(9)
  head.writeUIntBE(payload.length, 0, 3)
  head[3] = type
  head[4] = flags
  head.writeUInt32BE(stream, 5)
  return Buffer.concat([head, payload])
}

/** One header as an HPACK literal with a new name, without indexing (names and values under 127 bytes). */
function literal(name: string, value: string): Buffer {
  return Buffer.concat([Buffer.from([0, name.length]), Buffer.from(name), Buffer.from([value.length]), Buffer.from(value)])
}

export interface RawH2 {
  /** Every frame the server sent so far, in order. */
  frames: Frame[]
  /** Opens stream `id` (odd) as a gRPC POST to `path`, its request not ended. */
  open(id: number, path: string): void
  /** A PING round trip: every frame sent before it has been read and handled by the server (nghttp2 reads in order). */
  ping(): Promise<void>
  /** Resolves once the server closed the connection. */
  closed: Promise<void>
  socket: Socket
}

/** Connects, sends the preface and empty SETTINGS, and acknowledges the server's SETTINGS as the protocol asks. */
export function rawH2(port: number): Promise<RawH2> {
  return new Promise((resolve, reject) => {
    const socket = createConnection(port, '127.0.0.1')
    const frames: Frame[] = []
    const waiters: { pred: (f: Frame[]) => boolean; resolve: () => void }[] = []
    let pending = Buffer.alloc(0)
    socket.on('error', () => {})
    socket.on('data', (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk])
      while (pending.length >= 9 && pending.length >= 9 + pending.readUIntBE(0, 3)) {
        const length = pending.readUIntBE(0, 3)
        const f = {
          type: pending[3]!,
          flags: pending[4]!,
          stream: pending.readUInt32BE(5) & 0x7fffffff,
          payload: pending.subarray(9, 9 + length),
        }
        pending = pending.subarray(9 + length)
        frames.push(f)
        if (f.type === FRAME.SETTINGS && !(f.flags & ACK)) socket.write(frame(FRAME.SETTINGS, ACK, 0))
      }
      for (let i = waiters.length - 1; i >= 0; i--) if (waiters[i]!.pred(frames)) waiters.splice(i, 1)[0]!.resolve()
    })
    const closed = new Promise<void>((r) => socket.once('close', () => r()))
    const until = (pred: (f: Frame[]) => boolean): Promise<void> =>
      pred(frames) ? Promise.resolve() : new Promise((r) => waiters.push({ pred, resolve: r }))
    socket.once('connect', () => {
      socket.write(Buffer.concat([Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'), frame(FRAME.SETTINGS, 0, 0)]))
      resolve({
        frames,
        socket,
        closed,
        open(id, path) {
          const block = Buffer.concat([
            literal(':method', 'POST'),
            literal(':scheme', 'http'),
            literal(':path', path),
            literal(':authority', 'fairvisor'),
            literal('content-type', 'application/grpc'),
            literal('te', 'trailers'),
          ])
          socket.write(frame(FRAME.HEADERS, END_HEADERS, id, block))
        },
        ping() {
          const payload = Buffer.alloc(8)
          payload.writeDoubleBE(Math.random())
          socket.write(frame(FRAME.PING, 0, 0, payload))
          return until((fs) => fs.some((f) => f.type === FRAME.PING && f.flags & ACK && f.payload.equals(payload)))
        },
      })
    })
    socket.once('error', reject)
  })
}
