/**
 * The hot path of the standalone Redis store: one EVALSHA per request, handed
 * to ioredis as a ready-made Command (ioredis keeps the connection, the
 * handshake, reconnects, TLS and the reply parser), sent in batches that share
 * one write and one deadline timer.
 *
 * Why not ioredis' defineCommand + commandTimeout: the Script wrapper, its
 * argument handling and a timer per command cost about twice the client CPU
 * of this path, and in a gateway whose CPU is the bottleneck that is
 * throughput (README, "Measured figures").
 *
 * Batching (group commit): at most one batch is in flight. Calls made while
 * none is in flight leave at the end of the current event-loop turn, together;
 * calls made while one is in flight wait for its replies and then leave
 * together. Under light load a call therefore waits for nothing; under heavy
 * load batches grow by themselves, and Redis and the gateway pay one write, one
 * read and one wake-up per batch instead of per request. The wait is at most
 * one Redis round trip.
 *
 * Deadline: one timer per batch, armed when its first call is made (not when
 * it is sent), so time spent held counts. When it fires, every call of the
 * batch still unanswered fails with a timeout and a late reply is ignored
 * (the script ran whole or not at all, never half). A batch in flight that
 * times out (Redis hung) releases the next one, whose own timer keeps running:
 * no call waits longer than its own deadline.
 *
 * NOSCRIPT (Redis restarted or SCRIPT FLUSH): the call is sent again as EVAL,
 * which runs the script and caches it again, within the same deadline.
 */
import { createHash } from 'node:crypto'
import { Command, type Redis } from 'ioredis'

interface Pending {
  readonly args: string[]
  resolve(v: Buffer): void
  reject(e: Error): void
  done: boolean
}

class Batch {
  readonly calls: Pending[] = []
  /** Calls not yet answered or expired. */
  open = 0
  timer: NodeJS.Timeout | undefined
}

export class TimeoutError extends Error {
  constructor(ms: number) {
    super(`redis call timed out after ${ms} ms`)
  }
}

export class ScriptCaller {
  private readonly sha: string
  /** The batch whose replies are awaited. */
  private inflight: Batch | undefined
  /** The batch collecting calls, sent at the end of the turn or when `inflight` is done. */
  private next: Batch | undefined

  constructor(
    private readonly client: Redis,
    private readonly lua: string,
    /** Deadline timer of a batch, in ms. */
    private readonly timerMs: number,
  ) {
    this.sha = createHash('sha1').update(lua).digest('hex')
  }

  /** Runs the script with `args` = numkeys, keys…, argv… (strings); resolves with its reply as bytes. */
  call(args: string[]): Promise<Buffer> {
    const b = this.next ?? this.start()
    return new Promise<Buffer>((resolve, reject) => {
      b.calls.push({ args, resolve, reject, done: false })
      b.open++
    })
  }

  /** Calls, sent or not, whose answer is awaited (for tests and health). */
  get waiting(): number {
    return (this.inflight?.open ?? 0) + (this.next?.open ?? 0)
  }

  private start(): Batch {
    const b = new Batch()
    this.next = b
    b.timer = setTimeout(() => this.expire(b), this.timerMs)
    if (this.inflight === undefined) setImmediate(this.flush)
    return b
  }

  /** Sends the collecting batch in one write, unless a batch is still in flight. */
  private readonly flush = (): void => {
    const b = this.next
    if (b === undefined || this.inflight !== undefined) return
    this.next = undefined
    if (b.open === 0) return // every call expired before it could be sent
    this.inflight = b
    const stream = (this.client as unknown as { stream?: { cork(): void; uncork(): void; writable: boolean } }).stream
    const cork = stream?.writable === true && this.client.status === 'ready'
    if (cork) stream!.cork()
    for (const p of b.calls) if (!p.done) this.send('evalsha', this.sha, b, p)
    if (cork) stream!.uncork()
  }

  private send(name: 'evalsha' | 'eval', head: string, b: Batch, p: Pending): void {
    const cmd = new Command(name, [head, ...p.args], {}, (err: Error | null | undefined, reply: unknown) => {
      if (p.done) return
      if (err && name === 'evalsha' && err.message.startsWith('NOSCRIPT')) return this.send('eval', this.lua, b, p)
      this.settle(b, p)
      if (err) p.reject(err)
      else p.resolve(reply as Buffer)
    })
    this.client.sendCommand(cmd)
  }

  private settle(b: Batch, p: Pending): void {
    p.done = true
    if (--b.open > 0) return
    clearTimeout(b.timer)
    if (this.inflight === b) {
      this.inflight = undefined
      this.flush()
    }
  }

  private expire(b: Batch): void {
    const err = new TimeoutError(this.timerMs)
    for (const p of b.calls) {
      if (p.done) continue
      this.settle(b, p)
      p.reject(err)
    }
  }
}
