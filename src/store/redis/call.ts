/**
 * The hot path of the standalone Redis store: one EVALSHA per request, written
 * as prepared RESP text on a RespConnection, in batches that share one write
 * and one deadline timer. The caller encodes the script's arguments (numkeys,
 * keys, argv) itself, once; the command's head (EVALSHA and the sha, or EVAL
 * and the script) is kept encoded per argument count.
 *
 * Batching (group commit): at most one batch is in flight per connection,
 * whichever script its calls run (ScriptBatches: the take and adjust scripts
 * share one). Calls made while none is in flight leave at the end of the
 * current event-loop turn, together; calls made while one is in flight wait
 * for its replies and then leave together. Under light load a call therefore waits for nothing; under heavy
 * load batches grow by themselves, and Redis and the gateway pay one write, one
 * read and one wake-up per batch instead of per request. The wait is at most
 * one Redis round trip.
 *
 * Deadline: one timer per batch (../batcher.ts). A batch in flight that
 * times out (Redis hung) releases the next one, whose own timer keeps running:
 * no call waits longer than its own deadline.
 *
 * NOSCRIPT (Redis restarted or SCRIPT FLUSH): the call is sent again as EVAL,
 * which runs the script and caches it again, within the same deadline.
 */
import { createHash } from 'node:crypto'
import { Batch, type Pending as BatchCall } from '../batcher.js'
import { bulk, type RespConnection, type ReplyCallback } from './resp-connection.js'
import { StoreProtocolError, StoreUnavailableError } from '../../errors.js'
import { batchSpan, endSpan, type Span } from '../../observe/tracing.js'
import type { Attributes } from '@opentelemetry/api'

/** Called once per call: with the reply bytes, or with the error (a CallTimeoutError at the deadline). */
export type Done = (err: Error | null, reply?: Buffer) => void

interface Pending extends BatchCall {
  readonly script: ScriptCaller
  /** Number of arguments after the sha (numkeys, keys, argv). */
  readonly argc: number
  /** Those arguments as RESP bulk strings. */
  readonly args: string
  readonly done: Done
}

/**
 * The batches of one connection, shared by the scripts called on it: calls of
 * any of them made together leave together, in one write (a give-back
 * leaves with the takes of its turn, not in a write and a wake-up of its own).
 */
export class ScriptBatches {
  /** The batch whose replies are awaited. */
  private inflight: Batch<Pending> | undefined
  /** The batch collecting calls, sent at the end of the turn or when `inflight` is done. */
  private next: Batch<Pending> | undefined

  constructor(
    private readonly conn: RespConnection,
    /** Deadline timer of a batch, in ms. */
    private readonly timerMs: number,
    /** A traced batch's span attributes (db.system.name, server.address, …). */
    private readonly spanAttributes: Attributes = {},
  ) {}

  add(p: Pending): void {
    const b = this.next ?? this.start()
    b.add(p)
  }

  private start(): Batch<Pending> {
    const b = new Batch<Pending>('redis', this.timerMs, expire, this.release)
    this.next = b
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
      text += p.script.evalshaHead(p.argc) + p.args
      callbacks.push(this.answer(b, p, false))
    }
    // Traced requests in it: the batch's span, linked to theirs (undefined at once when tracing is off).
    b.span = batchSpan('EVALSHA', this.spanAttributes, b.calls, callbacks.length)
    // Not connected: nothing queues, every call fails now and the fail policy applies.
    if (!this.conn.send(text, callbacks)) for (const cb of callbacks) cb(new StoreUnavailableError('redis connection is not ready'))
  }

  private answer(b: Batch<Pending>, p: Pending, isEval: boolean): ReplyCallback {
    return (err, reply) => {
      if (p.settled) return
      if (err && !isEval && err.message.startsWith('NOSCRIPT')) {
        // EVAL runs the script and caches it again; same batch, same deadline.
        if (this.conn.send(p.script.evalHead(p.argc) + p.args, [this.answer(b, p, true)])) return
        err = new StoreUnavailableError('redis connection is not ready')
      }
      b.settle(p)
      if (err) p.done(err)
      else if (Buffer.isBuffer(reply)) p.done(null, reply)
      else p.done(new StoreProtocolError('redis script reply is not a string'))
    }
  }

  /** The batch in flight is answered (or expired): the collecting one may leave. */
  private readonly release = (b: Batch<Pending>): void => {
    if (b.span !== undefined) endSpan(b.span)
    if (this.inflight === b) {
      this.inflight = undefined
      this.flush()
    }
  }
}

export class ScriptCaller {
  private readonly sha: string
  private readonly evalshaHeads: string[] = []
  private readonly evalHeads: string[] = []

  constructor(
    conn: RespConnection,
    private readonly lua: string,
    /** The connection's batches, shared with its other scripts. */
    private readonly batches: ScriptBatches,
  ) {
    this.sha = createHash('sha1').update(lua).digest('hex')
    // Loaded on every (re)connection, before any call on it: a first EVALSHA answered NOSCRIPT is
    // sent again as EVAL after its reply, behind calls made meanwhile (a give-back would land after
    // the decision that should have seen it). Only a flush then ever meets NOSCRIPT.
    const load = (): void => void conn.command(['SCRIPT', 'LOAD', lua]).catch(() => undefined)
    conn.on('ready', load)
    if (conn.status === 'ready') load()
  }

  /**
   * Runs the script with `argc` arguments (numkeys, keys…, argv…), given
   * already encoded as RESP bulk strings in `args`; `done` gets its reply as
   * bytes. A callback, not a promise: every promise hop saved is CPU on the
   * hot path. `span`: the call's store-call span when its request is traced (the batch's span links to it).
   */
  call(argc: number, args: string, done: Done, span?: Span): void {
    this.batches.add({ script: this, argc, args, done, settled: false, span })
  }

  evalshaHead(argc: number): string {
    return (this.evalshaHeads[argc] ??= `*${argc + 2}\r\n${bulk('EVALSHA')}${bulk(this.sha)}`)
  }

  evalHead(argc: number): string {
    return (this.evalHeads[argc] ??= `*${argc + 2}\r\n${bulk('EVAL')}${bulk(this.lua)}`)
  }
}

const expire = (b: Batch<Pending>, err: Error): void => b.failOpen((p) => p.done(err))
