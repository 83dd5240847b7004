/**
 * One connection to a standalone Redis, speaking just what the store needs:
 * the handshake (AUTH, SELECT), pipelined commands written as prepared RESP
 * text, and replies parsed by `redis-parser` (the parser ioredis itself uses).
 * TCP, TLS and Unix sockets; reconnects by itself.
 *
 * Why not ioredis here: every ioredis command is an object with its own
 * promise, flag lookups and queue entry, and on the gateway's hot path that
 * measured 3–10 µs of CPU per request in paired runs, up to ≈ 15 % of the
 * gateway's CPU with Redis (docs/benchmarks.md, "Redis store"). A reply here is one
 * callback call.
 * The cluster store keeps ioredis, whose topology handling is the real work.
 *
 * Behaviour the store relies on:
 * - nothing queues while disconnected: send() returns false and the caller
 *   fails the call at once (the fail policy applies);
 * - a dropped connection fails every call in flight at once;
 * - reconnects every reconnectDelay(attempt) ms (100, 200, … 500), with a
 *   connect timeout, until close();
 * - events: 'ready' (handshake done), 'close' (connection lost), 'error'
 *   (socket or handshake error; the connection retries).
 */
import { EventEmitter } from 'node:events'
import { connect as netConnect, type Socket } from 'node:net'
import { connect as tlsConnect } from 'node:tls'
import Parser from 'redis-parser'
import { sniFor, type RedisTarget } from './url.js'
import { StoreUnavailableError } from '../../errors.js'

export type Reply = Buffer | number | null | Reply[]
/** Called once per command: with its reply, or with an error (a Redis error reply, or the connection's). */
export type ReplyCallback = (err: Error | null, reply?: Reply) => void

/** Handshake replies that mean the URL is wrong (password, ACL user, database number), not that the server is away. */
export const REFUSED_RE =
  /^(WRONGPASS|NOAUTH|NOPERM)\b|^ERR (invalid password|AUTH .*without any password|.*DB index is out of range|invalid DB index)/

export type ConnectionStatus = 'connecting' | 'ready' | 'closed'

export interface RespConnectionOptions {
  connectTimeoutMs: number
  reconnectDelay(attempt: number): number
}

/** One RESP bulk string: `$<byte length>\r\n<text>\r\n`. */
export const bulk = (text: string): string => `$${Buffer.byteLength(text)}\r\n${text}\r\n`

const numbers = new Map<number, string>()
/**
 * A number as a RESP bulk string. Rates, bursts and costs repeat from request
 * to request, so the first 1,024 distinct values are kept encoded: the hot path
 * then skips the number-to-text conversion and the length count.
 */
export function bulkNumber(n: number): string {
  let s = numbers.get(n)
  if (s === undefined) {
    s = bulk(String(n))
    if (numbers.size < 1024) numbers.set(n, s)
  }
  return s
}

/** RESP text of one command, e.g. ['SELECT', '2']. */
export function encodeCommand(args: readonly string[]): string {
  let s = `*${args.length}\r\n`
  for (const a of args) s += bulk(a)
  return s
}

export class RespConnection extends EventEmitter {
  status: ConnectionStatus = 'connecting'
  private socket: Socket | undefined
  private readonly parser: Parser
  /** Callbacks of the commands written, in order; `head` is the next to be answered. */
  private queue: (ReplyCallback | undefined)[] = []
  private head = 0
  private attempt = 0
  private retry: NodeJS.Timeout | undefined

  constructor(
    private readonly target: RedisTarget,
    private readonly opts: RespConnectionOptions,
  ) {
    super()
    this.parser = new Parser({
      returnBuffers: true,
      returnReply: (reply: Reply) => this.answer(null, reply),
      returnError: (err: Error) => this.answer(err),
      // A reply we cannot parse: nothing after it can be trusted, start over.
      returnFatalError: (err: Error) => this.socket?.destroy(err),
    })
    this.open()
  }

  /**
   * Writes `text` (one or more encoded commands) and registers their callbacks
   * in order. False, and nothing written, when not ready.
   */
  send(text: string, callbacks: readonly ReplyCallback[]): boolean {
    const s = this.socket
    if (this.status !== 'ready' || s === undefined) return false
    for (const cb of callbacks) this.queue.push(cb)
    s.write(text)
    return true
  }

  /** One command as a promise (tests, QUIT); rejects at once when not ready. */
  command(args: readonly string[]): Promise<Reply> {
    return new Promise((resolve, reject) => {
      const ok = this.send(encodeCommand(args), [(err, reply) => (err ? reject(err) : resolve(reply!))])
      if (!ok) reject(new StoreUnavailableError('redis connection is not ready'))
    })
  }

  /** Closes for good: no reconnect; calls in flight fail. */
  disconnect(): void {
    this.status = 'closed'
    clearTimeout(this.retry)
    this.socket?.destroy()
  }

  /** QUIT politely when connected, then close (bounded by the caller). */
  async quit(): Promise<void> {
    if (this.status === 'ready') await this.command(['QUIT']).catch(() => undefined)
    this.disconnect()
  }

  private open(): void {
    const t = this.target
    const host = t.host ?? '127.0.0.1'
    const port = t.port ?? 6379
    let socket: Socket
    if (t.path !== undefined) socket = netConnect({ path: t.path })
    else if (t.tls) socket = tlsConnect({ host, port, ...sniFor(host) })
    else socket = netConnect({ host, port })
    this.socket = socket
    socket.setNoDelay(true)
    socket.setKeepAlive(true, 30_000)
    const timer = setTimeout(
      () => socket.destroy(new StoreUnavailableError(`connect timeout after ${this.opts.connectTimeoutMs} ms`)),
      this.opts.connectTimeoutMs,
    )
    socket.once(t.tls && t.path === undefined ? 'secureConnect' : 'connect', () => {
      clearTimeout(timer)
      this.handshake(socket)
    })
    socket.on('data', (chunk: Buffer) => this.parser.execute(chunk))
    socket.on('error', (err: Error) => {
      if (this.listenerCount('error') > 0) this.emit('error', err)
    })
    socket.once('close', () => {
      clearTimeout(timer)
      this.lost(socket)
    })
  }

  /** AUTH, SELECT and PING, written before anything else; ready once every reply is OK. An error that waiting cannot fix carries `refused: true`. */
  private handshake(socket: Socket): void {
    const t = this.target
    const steps: string[][] = []
    if (t.password !== undefined) steps.push(t.username !== undefined ? ['AUTH', t.username, t.password] : ['AUTH', t.password])
    if (t.db !== 0) steps.push(['SELECT', String(t.db)])
    // A server that wants a password we do not send answers NOAUTH here, not on the first request.
    steps.push(['PING'])
    let left = steps.length
    const cb: ReplyCallback = (err) => {
      if (err)
        return socket.destroy(
          Object.assign(new StoreUnavailableError(`redis handshake failed: ${err.message}`), { refused: REFUSED_RE.test(err.message) }),
        )
      if (--left === 0) this.ready()
    }
    for (let i = 0; i < steps.length; i++) this.queue.push(cb)
    socket.write(steps.map((s) => encodeCommand(s)).join(''))
  }

  private ready(): void {
    this.attempt = 0
    this.status = 'ready'
    this.emit('ready')
  }

  private answer(err: Error | null, reply?: Reply): void {
    const cb = this.queue[this.head]
    this.queue[this.head++] = undefined
    if (this.head === this.queue.length) {
      this.queue.length = 0
      this.head = 0
    } else if (this.head > 1024 && this.head * 2 > this.queue.length) {
      this.queue = this.queue.slice(this.head)
      this.head = 0
    }
    cb?.(err, reply)
  }

  /** The socket closed: fail what it carried, then reconnect unless closed for good. */
  private lost(socket: Socket): void {
    if (this.socket !== socket) return
    this.socket = undefined
    const wasReady = this.status === 'ready'
    const pending = this.queue.slice(this.head)
    this.queue = []
    this.head = 0
    this.parser.reset()
    if (this.status !== 'closed') this.status = 'connecting'
    const err = new StoreUnavailableError('redis connection lost')
    for (const cb of pending) cb?.(err)
    if (wasReady) this.emit('close')
    if (this.status === 'closed') return
    this.retry = setTimeout(() => this.open(), this.opts.reconnectDelay(++this.attempt))
  }
}
