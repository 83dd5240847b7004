/**
 * What the standalone and the cluster Redis stores share: options, state and
 * connection-state logging (deadline, reconnect pacing and error mapping are
 * every remote store's: remote.ts).
 *
 * Failure handling: a call that errors or misses its deadline
 * (FAIRVISOR_REDIS_TIMEOUT_MS) fails with a StoreError and the engine applies
 * the fail policy. While Redis is down nothing queues: a call fails at once,
 * and the connection retries every 100–500 ms in the background; limiting
 * resumes by itself on reconnect.
 */
import type { EventEmitter } from 'node:events'
import type { Attributes } from '@opentelemetry/api'
import { ATTR_DB_OPERATION_NAME, ATTR_DB_SYSTEM_NAME, ATTR_SERVER_ADDRESS, ATTR_SERVER_PORT } from '@opentelemetry/semantic-conventions'
import type { RedisTarget } from './url.js'
import { REFUSED_RE } from './resp-connection.js'
import type { StoreLog } from '../remote.js'
import type { StoreState } from '../store.js'
import { StoreUnavailableError } from '../../errors.js'

export interface RedisStoreOptions {
  target: RedisTarget
  /** Deadline of each call in ms (FAIRVISOR_REDIS_TIMEOUT_MS, default 50). */
  timeoutMs: number
  log?: StoreLog
}

/** A traced batch's attributes (database semantic conventions): the server it goes to. */
export function redisSpanAttributes(target: RedisTarget): Attributes {
  const where =
    target.path !== undefined
      ? { [ATTR_SERVER_ADDRESS]: target.path }
      : { [ATTR_SERVER_ADDRESS]: target.host ?? '', [ATTR_SERVER_PORT]: target.port ?? 6379 }
  return { [ATTR_DB_SYSTEM_NAME]: 'redis', [ATTR_DB_OPERATION_NAME]: 'EVALSHA', ...where }
}

/** Connecting while the client is not ready; degraded while calls fail. */
export function redisState(status: string, lastCallFailed: boolean): StoreState {
  return status !== 'ready' ? 'connecting' : lastCallFailed ? 'degraded' : 'ok'
}

/** Log connection transitions once each, not once per failing request. */
export function watchConnection(client: Pick<EventEmitter, 'on'>, name: string, log: StoreLog | undefined): void {
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

/** QUIT politely (bounded to 500 ms), then drop the connection. */
export async function closeClient(client: {
  removeAllListeners(ev: string): unknown
  quit(): Promise<unknown>
  disconnect(): void
}): Promise<void> {
  client.removeAllListeners('close') // a deliberate close is not an outage
  await Promise.race([client.quit().catch(() => undefined), new Promise((r) => setTimeout(r, 500))])
  client.disconnect()
}

/** Resolves true once `client` is ready, false after `ms`; rejects when the server refuses the URL (REFUSED_RE: waiting would not help). */
export function waitForReady(client: { status: string } & Pick<EventEmitter, 'on' | 'off'>, ms: number): Promise<boolean> {
  if (client.status === 'ready') return Promise.resolve(true)
  return new Promise((resolve, reject) => {
    const done = (v: boolean, err?: Error): void => {
      clearTimeout(t)
      client.off('ready', onReady)
      client.off('error', onError)
      client.off('node error', onError)
      if (err) reject(err)
      else resolve(v)
    }
    const onReady = (): void => done(true)
    // The standalone connection marks a refusal; the cluster client (ioredis) passes the node's reply on.
    const onError = (err: Error & { refused?: boolean; lastNodeError?: Error }): void => {
      const reason = err.lastNodeError?.message ?? err.message.replace(/^redis handshake failed: /, '')
      if (err.refused === true || REFUSED_RE.test(reason)) done(false, new StoreUnavailableError(reason))
    }
    const t = setTimeout(() => done(false), ms)
    client.on('ready', onReady)
    client.on('error', onError)
    client.on('node error', onError)
  })
}
