/**
 * Standalone Redis store: every limit of one request is checked and committed
 * by ONE EVALSHA of the take script (script.ts), atomically, all or
 * nothing per group, on the server's clock, sent by the ScriptCaller
 * (call.ts) on a RespConnection (resp-connection.ts), which falls back
 * to EVAL on a NOSCRIPT reply (Redis restarted or SCRIPT FLUSH), so a flush
 * never reaches a client. Failure handling: common.ts.
 */
import { ScriptCaller } from './call.js'
import { asksReads, encodeArgs, readTake, visitAdjustArgs, visitTakeArgs } from './codec.js'
import { closeClient, redisState, waitForReady, watchConnection, type RedisStoreOptions } from './common.js'
import { callTimerMs, reconnectDelay, storeError } from '../remote.js'
import { redisScripts } from './script.js'
import { RespConnection } from './resp-connection.js'
import { storedKey } from '../stored-key.js'
import type { Adjustment, ApplyDone, Check, Outcomes, Store, StoreState } from '../store.js'

export class RedisStore implements Store {
  readonly kind = 'redis'
  readonly client: RespConnection
  private readonly take: ScriptCaller
  private readonly adjuster: ScriptCaller
  private lastCallFailed = false

  constructor(opts: RedisStoreOptions) {
    this.client = new RespConnection(opts.target, { connectTimeoutMs: 1000, reconnectDelay })
    const scripts = redisScripts()
    this.take = new ScriptCaller(this.client, scripts.take, callTimerMs(opts.timeoutMs))
    this.adjuster = new ScriptCaller(this.client, scripts.adjust, callTimerMs(opts.timeoutMs))
    watchConnection(this.client, 'redis', opts.log)
  }

  ready(timeoutMs: number): Promise<boolean> {
    return waitForReady(this.client, timeoutMs)
  }

  apply(checks: readonly Check[], _now: number, done: ApplyDone, reads?: Outcomes): void {
    // `_now` is ignored: the script reads the server clock.
    const back = reads !== undefined && asksReads(checks) ? reads : undefined
    const { argc, args } = encodeArgs((visit) => visitTakeArgs(checks, undefined, visit, back !== undefined))
    this.take.call(argc, args, (err, reply) => {
      if (err) {
        this.lastCallFailed = true
        return done(storeError('redis', err))
      }
      this.lastCallFailed = false
      const out: Outcomes = new Array(checks.length)
      try {
        readTake(reply!, out, undefined, back)
      } catch (e) {
        return done(storeError('redis', e))
      }
      done(null, out)
    })
  }

  adjust(adjustments: readonly Adjustment[], _now: number, done: (err: Error | null) => void): void {
    if (adjustments.length === 0) return done(null)
    const { argc, args } = encodeArgs((visit) => visitAdjustArgs(adjustments, visit))
    this.adjuster.call(argc, args, (err) => done(err ? storeError('redis', err) : null))
  }

  /** One DEL of the keys as stored (the admin API). */
  reset(keys: readonly string[], done: (err: Error | null) => void): void {
    if (keys.length === 0) return done(null)
    this.client.command(['DEL', ...keys.map(storedKey)]).then(
      () => done(null),
      (err: unknown) => done(storeError('redis', err)),
    )
  }

  state(): StoreState {
    return redisState(this.client.status, this.lastCallFailed)
  }

  close(): Promise<void> {
    return closeClient(this.client)
  }
}
