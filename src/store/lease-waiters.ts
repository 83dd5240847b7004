/**
 * Requests waiting for a fetch of another request, of any thread, to end
 * (store/leasing.ts): per lease-table group, the requests to run again once
 * that group's generation moves on. One Atomics.waitAsync per group, not per
 * request: a burst on a hot key being fetched costs one waiter.
 */

/** Bound on one wait for another thread's fetch; the wait is then retried (a fetch lasts a store round trip). */
const WAIT_MS = 250

export class FetchWaiters {
  /** Requests waiting for a fetch of a key of table group n. */
  private readonly waiting = new Map<number, (() => void)[]>()

  /** Over the lease table's generation words. */
  constructor(private readonly gens: Int32Array) {}

  /** Groups with requests waiting. */
  get size(): number {
    return this.waiting.size
  }

  /** Run `retry` once group `group`'s generation moves on from `gen` (a fetch there ended), or after WAIT_MS. */
  wait(group: number, gen: number, retry: () => void): void {
    const list = this.waiting.get(group)
    if (list) return void list.push(retry)
    this.waiting.set(group, [retry])
    const wake = (): void => {
      const l = this.waiting.get(group)
      this.waiting.delete(group)
      if (l) for (const w of l) w()
    }
    // waitAsync (ES2024) resolves on the notify of whichever thread ends the fetch, this one included.
    const r = (Atomics as unknown as AtomicsAsync).waitAsync(this.gens, group, gen, WAIT_MS)
    if (r.async) void r.value.then(wake)
    else queueMicrotask(wake)
  }
}

interface AtomicsAsync {
  waitAsync(
    a: Int32Array,
    i: number,
    v: number,
    timeoutMs: number,
  ): { async: false; value: string } | { async: true; value: Promise<string> }
}
