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

/** Called once per call: with the reply bytes, or with the error (a TimeoutError at the deadline). */
export type Done = (err: Error | null, reply?: Buffer) => void

interface Pending {
  readonly args: string[]
  readonly done: Done
  settled: boolean
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

  /**
   * Runs the script with `args` = numkeys, keys…, argv… (strings); `done` gets
   * its reply as bytes. A callback, not a promise: the caller wraps the whole
   * request in one promise, and every promise hop saved is CPU on the hot path.
   */
  call(args: string[], done: Done): void {
    const b = this.next ?? this.start()
    b.calls.push({ args, done, settled: false })
    b.open++
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
    for (const p of b.calls) if (!p.settled) this.send('evalsha', this.sha, b, p)
    if (cork) stream!.uncork()
  }

  private send(name: 'evalsha' | 'eval', head: string, b: Batch, p: Pending): void {
    // Nested args: Command flattens them once, so no copy is made here.
    const cmd = new Command(name, [head, p.args], {}, (err: Error | null | undefined, reply: unknown) => {
      if (p.settled) return
      if (err && name === 'evalsha' && err.message.startsWith('NOSCRIPT')) return this.send('eval', this.lua, b, p)
      this.settle(b, p)
      if (err) p.done(err)
      else p.done(null, reply as Buffer)
    })
    this.client.sendCommand(cmd)
  }

  private settle(b: Batch, p: Pending): void {
    p.settled = true
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
      if (p.settled) continue
      this.settle(b, p)
      p.done(err)
    }
  }
}
