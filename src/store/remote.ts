/**
 * What every store on a server (Redis, Redis Cluster, PostgreSQL) shares: the
 * call deadline, reconnect pacing and the mapping of a failed call to a
 * StoreError, on which the engine applies the fail policy.
 */
import { StoreError, StoreUnavailableError } from '../errors.js'

/** How a store on a server reports connection transitions and failures (the gateway's logger, or a test's). */
export type StoreLog = (level: 'info' | 'warn' | 'error', fields: Record<string, unknown>, msg: string) => void

/**
 * The timer armed for a store call: the deadline less a little headroom (a tenth,
 * at most 5 ms), so that the request's answer — fail policy applied, response
 * written — lands within the deadline even when this process's event loop or
 * the machine's scheduler runs the timer a few milliseconds late.
 */
export function callTimerMs(deadlineMs: number): number {
  return Math.max(1, deadlineMs - Math.min(5, Math.floor(deadlineMs / 10)))
}

/** Reconnect quickly but not in a hot loop: 100, 200, … capped at 500 ms. */
export const reconnectDelay = (attempt: number): number => Math.min(100 * attempt, 500)

/**
 * A failed call of `backend` ('redis', 'postgres') as a StoreError; the error's code (e.g. a
 * SQLSTATE) leads the message. A deadline is already a StoreTimeoutError (the batch's
 * CallTimeoutError, the cluster's timer) and passes through unchanged.
 */
export function storeError(backend: string, err: unknown): StoreError {
  if (err instanceof StoreError) return err
  const e = err as Error & { code?: unknown }
  const code = typeof e?.code === 'string' ? `${e.code} ` : ''
  return new StoreUnavailableError(`${backend} call failed: ${code}${e?.message ?? String(err)}`, { cause: err })
}
