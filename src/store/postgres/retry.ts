/**
 * Serialization failures and deadlocks (SQLSTATE 40001, 40P01) of the
 * PostgreSQL store's statements. The statement rolled back whole (nothing was
 * charged), so it is sent again after a pause, while the call's deadline
 * leaves room for it. On PostgreSQL they come only from statements of others
 * (the lock order rules deadlocks out among the store's own); on YugabyteDB
 * also from conflicts its distributed transactions detect (a hot key under
 * fail-on-conflict, a schema change under way). The pause is drawn uniformly
 * below an exponentially growing bound ("full jitter"), so gateways that
 * collided do not collide again in step.
 */

const RETRYABLE = new Set(['40001', '40P01'])

/** A serialization failure or a deadlock: worth sending again. */
export const retryable = (err: unknown): boolean => RETRYABLE.has(String((err as { code?: unknown } | null)?.code ?? ''))

/** Sends of one statement at most (the first and its retries). */
export const MAX_SENDS = 8

/** Bounds of the pause: 2 ms before the first retry, doubling, never above 50 ms. */
const BASE_MS = 2
const CAP_MS = 50

/** The pause before retry `attempt` (1: the first): uniform in [0, min(CAP, BASE × 2^(attempt − 1))). */
export function backoffMs(attempt: number, random: () => number = Math.random): number {
  return random() * Math.min(CAP_MS, BASE_MS * 2 ** (attempt - 1))
}

/**
 * The pause before retry `attempt` of a call due at `deadline` (performance.now() ms), or
 * undefined when the sends are used up or the retry would not even leave before the deadline.
 */
export function retryPause(
  attempt: number,
  deadline: number,
  now = performance.now(),
  random: () => number = Math.random,
): number | undefined {
  if (attempt >= MAX_SENDS) return undefined
  const pause = backoffMs(attempt, random)
  return now + pause < deadline ? pause : undefined
}
