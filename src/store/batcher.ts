/**
 * The group-commit batch shared by the stores on a server (Redis, PostgreSQL):
 * calls made together leave together, and share one deadline timer.
 *
 * Deadline: the timer is armed when the batch is opened, at its first call
 * (not when it is sent), so time spent held counts. When it fires, every call
 * still unanswered fails with a CallTimeoutError; a late answer finds its call
 * settled and is ignored (the command ran whole or not at all, never half).
 * "Unanswered" is judged after the event loop has read what its sockets hold:
 * timers run before I/O in a loop turn, so after a busy stretch (a loaded
 * machine, a cold start) the timer would otherwise fail calls whose replies
 * came in time and sit unread. The expiry waits for that turn's poll phase
 * (setImmediate runs right after it), a fraction of a millisecond.
 * When the last open call is settled, by an answer or by the deadline, the
 * timer is cleared and `onEmpty` runs (Redis sends its next batch then).
 */

/** One call of a batch; `settled` once answered or expired. */
export interface Pending {
  settled: boolean
}

import { StoreTimeoutError } from '../errors.js'

/** A call that reached its deadline: recognised by its class, never by its message. */
export class CallTimeoutError extends StoreTimeoutError {
  constructor(
    backend: string,
    readonly ms: number,
  ) {
    super(`${backend} call timed out after ${ms} ms`)
  }
}

export class Batch<P extends Pending> {
  readonly calls: P[] = []
  /** Calls not yet answered or expired. */
  open = 0
  /** Retries spent (PostgreSQL serialization failures), within the same deadline. */
  tries = 0
  /** When the deadline timer fires (performance.now() ms): a retry must leave before it. */
  readonly deadline: number
  private readonly timer: NodeJS.Timeout
  private expiry: NodeJS.Immediate | undefined

  constructor(
    backend: string,
    timerMs: number,
    /** Runs at the deadline; fails the unanswered calls (failOpen). */
    onExpire: (b: Batch<P>, err: CallTimeoutError) => void,
    /** Runs once the last open call is settled. */
    private readonly onEmpty?: (b: Batch<P>) => void,
  ) {
    this.deadline = performance.now() + timerMs
    this.timer = setTimeout(() => {
      this.expiry = setImmediate(() => onExpire(this, new CallTimeoutError(backend, timerMs)))
    }, timerMs)
  }

  add(p: P): void {
    this.calls.push(p)
    this.open++
  }

  /** Marks `p` answered; the last one clears the deadline and runs `onEmpty`. */
  settle(p: P): void {
    p.settled = true
    if (--this.open > 0) return
    clearTimeout(this.timer)
    clearImmediate(this.expiry)
    this.onEmpty?.(this)
  }

  /** The calls not yet answered. */
  unsettled(): P[] {
    return this.calls.filter((p) => !p.settled)
  }

  /** Settles every unanswered call, then tells it through `fail`. */
  failOpen(fail: (p: P) => void): void {
    for (const p of this.calls) {
      if (p.settled) continue
      this.settle(p)
      fail(p)
    }
  }
}
