/**
 * Redis store: every limit of one request is checked and committed by ONE
 * EVALSHA of the token-bucket script (redis-script.ts), atomically, all or
 * nothing per group, on the server's clock, sent by the ScriptCaller
 * (redis-call.ts) on a RespConnection (resp-connection.ts), which falls back
 * to EVAL on a NOSCRIPT reply (Redis restarted or SCRIPT FLUSH), so a flush
 * never reaches a client. Also the helpers the cluster store (ioredis) shares.
 *
 * Failure handling: a call that errors or misses its deadline
 * (FAIRVISOR_REDIS_TIMEOUT_MS) throws StoreError and the engine applies the
 * fail policy. While Redis is down nothing queues: a call fails at once, and
 * the connection retries every 100–500 ms in the background; limiting resumes
 * by itself on reconnect.
 */
import type { RedisOptions } from 'ioredis'
import { StoreError } from '../errors.js'
import type { FailPolicy } from '../settings.js'
import { TAKE_LUA, REFUND_LUA, TAKE_REPLY_BYTES } from './redis-script.js'
import { ScriptCaller } from './redis-call.js'
import { bulk, bulkNumber, RespConnection } from './resp-connection.js'
import { sniFor, type RedisTarget } from './redis-url.js'
import type { ApplyDone, Check, Outcomes, Store, StoreHealth } from './store.js'

export type RedisLog = (level: 'info' | 'warn' | 'error', fields: Record<string, unknown>, msg: string) => void

export interface RedisStoreOptions {
  target: RedisTarget
  /** Deadline of each call in ms (FAIRVISOR_REDIS_TIMEOUT_MS, default 50). */
  timeoutMs: number
  /** Readiness: in `open` mode the gateway stays ready while Redis is down. */
  failPolicy: FailPolicy
  log?: RedisLog
}

/** Commands added to the ioredis cluster client by defineCommand (numkeys passed first). */
export interface ScriptCommands {
  fvTakeBuffer(...args: string[]): Promise<Buffer>
  fvRefund(...args: (string | number)[]): Promise<number>
}

/**
 * The timer armed for a Redis call: the deadline less a little headroom (a tenth,
 * at most 5 ms), so that the request's answer — fail policy applied, response
 * written — lands within the deadline even when this process's event loop or
 * the machine's scheduler runs the timer a few milliseconds late.
 */
export function callTimerMs(deadlineMs: number): number {
  return Math.max(1, deadlineMs - Math.min(5, Math.floor(deadlineMs / 10)))
}

/** Reconnect quickly but not in a hot loop: 100, 200, … capped at 500 ms. */
export const reconnectDelay = (attempt: number): number => Math.min(100 * attempt, 500)

export function defineScripts(client: { defineCommand(name: string, def: { lua: string }): void }): void {
  client.defineCommand('fvTake', { lua: TAKE_LUA })
  client.defineCommand('fvRefund', { lua: REFUND_LUA })
}

/** EVALSHA arguments for checks[idx…]: numkeys, keys, then 4 ARGV per check. */
export function takeArgs(checks: readonly Check[], idx?: readonly number[]): string[] {
  const n = idx === undefined ? checks.length : idx.length
  const args: string[] = new Array(1 + n * 5)
  args[0] = String(n)
  for (let k = 0; k < n; k++) {
    const c = checks[idx === undefined ? k : idx[k]!]!
    args[1 + k] = c.key
    const a = 1 + n + k * 4
    args[a] = String(c.rate)
    args[a + 1] = String(c.burst)
    args[a + 2] = String(c.cost)
    args[a + 3] = c.shadow ? '1' : '0'
  }
  return args
}

const SHADOW = bulk('1')
const ENFORCE = bulk('0')

/**
 * takeArgs(checks) as RESP bulk strings, for the standalone store's hot path:
 * `argc` arguments in `args`. Numbers come from the bulkNumber cache.
 */
export function encodeTakeArgs(checks: readonly Check[]): { argc: number; args: string } {
  const n = checks.length
  let args = bulkNumber(n)
  for (let k = 0; k < n; k++) args += bulk(checks[k]!.key)
  for (let k = 0; k < n; k++) {
    const c = checks[k]!
    args += bulkNumber(c.rate) + bulkNumber(c.burst) + bulkNumber(c.cost) + (c.shadow ? SHADOW : ENFORCE)
  }
  return { argc: 1 + n * 5, args }
}

/** Script reply (TAKE_REPLY_BYTES per check, redis-script.ts) → outcomes, written into `out` at the checks' own positions. */
export function readTake(reply: Buffer, out: Outcomes, idx?: readonly number[]): void {
  const n = idx === undefined ? out.length : idx.length
  if (!takeReplyFits(reply, n)) throw new Error(`redis script reply of ${Buffer.isBuffer(reply) ? reply.length : typeof reply} bytes, expected ${n * TAKE_REPLY_BYTES}`)
  for (let k = 0; k < n; k++) {
    const o = k * TAKE_REPLY_BYTES
    const status = reply.readInt8(o)
    if (status < 0) continue
    out[idx === undefined ? k : idx[k]!] = { allowed: status === 1, tokens: reply.readDoubleLE(o + 1), retryAfter: reply.readDoubleLE(o + 9) }
  }
}

/** True when `reply` is the script's answer for `n` checks (anything else is not read). */
export const takeReplyFits = (reply: unknown, n: number): boolean => Buffer.isBuffer(reply) && reply.length === n * TAKE_REPLY_BYTES

/** Status of check k in a script reply: 1 allowed, 0 rejected, -1 not evaluated. */
export const takeStatus = (reply: Buffer, k: number): number => reply.readInt8(k * TAKE_REPLY_BYTES)

export function storeError(err: unknown): StoreError {
  if (err instanceof StoreError) return err
  const e = err as Error
  const timeout = /timed out/i.test(e?.message ?? '')
  return new StoreError(`redis ${timeout ? 'call timed out' : `call failed: ${e?.message ?? String(err)}`}`, timeout ? 'FV_STORE_TIMEOUT' : 'FV_STORE_UNAVAILABLE', { cause: err })
}

/** Connection options shared by the standalone client and cluster nodes. */
export function connectionOptions(t: RedisTarget): RedisOptions {
  return {
    username: t.username,
    password: t.password,
    // The offline queue would park requests behind reconnect attempts.
    enableOfflineQueue: false,
    // A command caught by a dropped connection fails now instead of being resent later.
    maxRetriesPerRequest: 0,
    connectTimeout: 1000,
    retryStrategy: reconnectDelay,
    ...(t.tls ? { tls: sniFor(t.host) } : {}),
  }
}

/** Log connection transitions once each, not once per failing request. */
export function watchConnection(client: { on(ev: string, fn: (...a: any[]) => void): unknown }, name: string, log: RedisLog | undefined): void {
  let up = false
  let lastError = ''
  client.on('ready', () => {
    up = true
    lastError = ''
    log?.('info', { store: name }, 'redis store connected')
  })
  client.on('close', () => {
    if (up) log?.('warn', { store: name }, 'redis store connection lost; reconnecting (fail policy applies meanwhile)')
    up = false
  })
  client.on('error', (err: Error) => {
    if (err.message === lastError) return
    lastError = err.message
    log?.('warn', { store: name, err: err.message }, 'redis store connection error')
  })
}

/** Connecting while not ready; degraded while calls fail; ready for traffic in fail-open mode even when down. */
export function redisHealth(status: string, lastCallFailed: boolean, failOpen: boolean): StoreHealth {
  const state = status !== 'ready' ? 'connecting' : lastCallFailed ? 'degraded' : 'ok'
  return { state, ready: failOpen || status === 'ready' }
}

/** QUIT politely (bounded to 500 ms), then drop the connection. */
export async function closeClient(client: { removeAllListeners(ev: string): unknown; quit(): Promise<unknown>; disconnect(): void }): Promise<void> {
  client.removeAllListeners('close') // a deliberate close is not an outage
  await Promise.race([client.quit().catch(() => undefined), new Promise((r) => setTimeout(r, 500))])
  client.disconnect()
}

/** Resolves true once `client` is ready, false after `ms`. */
export function waitForReady(client: { status: string; on(ev: 'ready', fn: () => void): unknown; off(ev: 'ready', fn: () => void): unknown }, ms: number): Promise<boolean> {
  if (client.status === 'ready') return Promise.resolve(true)
  return new Promise((resolve) => {
    const done = (v: boolean): void => {
      clearTimeout(t)
      client.off('ready', onReady)
      resolve(v)
    }
    const onReady = (): void => done(true)
    const t = setTimeout(() => done(false), ms)
    client.on('ready', onReady)
  })
}

export class RedisStore implements Store {
  readonly kind = 'redis'
  readonly client: RespConnection
  private readonly take: ScriptCaller
  private readonly failOpen: boolean
  private lastCallFailed = false

  constructor(private readonly opts: RedisStoreOptions) {
    this.failOpen = opts.failPolicy === 'open'
    this.client = new RespConnection(opts.target, { connectTimeoutMs: 1000, reconnectDelay })
    this.take = new ScriptCaller(this.client, TAKE_LUA, callTimerMs(opts.timeoutMs))
    watchConnection(this.client, 'redis', opts.log)
  }

  /** Resolves true once connected, false after `ms` (the gateway then starts anyway, fail policy applies). */
  waitReady(ms: number): Promise<boolean> {
    return waitForReady(this.client, ms)
  }

  apply(checks: readonly Check[], now: number): Promise<Outcomes> {
    return new Promise<Outcomes>((resolve, reject) => this.applyThen(checks, now, (err, out) => (err ? reject(err) : resolve(out!))))
  }

  applyThen(checks: readonly Check[], _now: number, done: ApplyDone): void {
    // `_now` is ignored: the script reads the server clock.
    const { argc, args } = encodeTakeArgs(checks)
    this.take.call(argc, args, (err, reply) => {
      if (err) {
        this.lastCallFailed = true
        return done(storeError(err))
      }
      this.lastCallFailed = false
      const out: Outcomes = new Array(checks.length)
      try {
        readTake(reply!, out)
      } catch (e) {
        return done(storeError(e))
      }
      done(null, out)
    })
  }

  health(): StoreHealth {
    return redisHealth(this.client.status, this.lastCallFailed, this.failOpen)
  }

  close(): Promise<void> {
    return closeClient(this.client)
  }
}
