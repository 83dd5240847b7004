/**
 * The hot path of the standalone Redis store: one EVALSHA per request, written
 * as prepared RESP text on a RespConnection, in batches that share one write
 * and one deadline timer. The caller encodes the script's arguments (numkeys,
 * keys, argv) itself, once; the command's head (EVALSHA and the sha, or EVAL
 * and the script) is kept encoded per argument count.
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
import { bulk, type RespConnection, type ReplyCallback } from './resp-connection.js'

/** Called once per call: with the reply bytes, or with the error (a TimeoutError at the deadline). */
export type Done = (err: Error | null, reply?: Buffer) => void

interface Pending {
  /** Number of arguments after the sha (numkeys, keys, argv). */
  readonly argc: number
  /** Those arguments as RESP bulk strings. */
  readonly args: string
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
  private readonly evalshaHeads: string[] = []
  private readonly evalHeads: string[] = []

  constructor(
    private readonly conn: RespConnection,
    private readonly lua: string,
    /** Deadline timer of a batch, in ms. */
    private readonly timerMs: number,
  ) {
    this.sha = createHash('sha1').update(lua).digest('hex')
  }

  /**
   * Runs the script with `argc` arguments (numkeys, keys…, argv…), given
   * already encoded as RESP bulk strings in `args`; `done` gets its reply as
   * bytes. A callback, not a promise: every promise hop saved is CPU on the
   * hot path.
   */
  call(argc: number, args: string, done: Done): void {
    const b = this.next ?? this.start()
    b.calls.push({ argc, args, done, settled: false })
    b.open++
  }

  private evalshaHead(argc: number): string {
    return (this.evalshaHeads[argc] ??= `*${argc + 2}\r\n${bulk('EVALSHA')}${bulk(this.sha)}`)
  }

  private evalHead(argc: number): string {
    return (this.evalHeads[argc] ??= `*${argc + 2}\r\n${bulk('EVAL')}${bulk(this.lua)}`)
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
    let text = ''
    const callbacks: ReplyCallback[] = []
    for (const p of b.calls) {
      if (p.settled) continue
      text += this.evalshaHead(p.argc) + p.args
      callbacks.push(this.answer(b, p, false))
    }
    // Not connected: nothing queues, every call fails now and the fail policy applies.
    if (!this.conn.send(text, callbacks)) for (const cb of callbacks) cb(new Error('redis connection is not ready'))
  }

  private answer(b: Batch, p: Pending, isEval: boolean): ReplyCallback {
    return (err, reply) => {
      if (p.settled) return
      if (err && !isEval && err.message.startsWith('NOSCRIPT')) {
        // EVAL runs the script and caches it again; same batch, same deadline.
        if (this.conn.send(this.evalHead(p.argc) + p.args, [this.answer(b, p, true)])) return
        err = new Error('redis connection is not ready')
      }
      this.settle(b, p)
      if (err) p.done(err)
      else if (Buffer.isBuffer(reply)) p.done(null, reply)
      else p.done(new Error('redis script reply is not a string'))
    }
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
