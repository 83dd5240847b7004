/**
 * How many requests the process holds for their debt (max_delay_ms), against
 * FAIRVISOR_MAX_DELAYED: with worker threads every thread takes its slots
 * from one count in a SharedArrayBuffer made by the supervisor, so the bound
 * is the process's, not a thread's.
 *
 * Layout (Int32): [0] the total, [h] what holder h (a worker id, 1-based; 1
 * for a single thread) holds. The total is taken with compare-and-swap, so it
 * never passes the bound; a holder's own count lets the supervisor give back
 * the slots of a worker that died (`releaseOf`).
 */
export class HoldSlots {
  private readonly counts: Int32Array

  /** `shared`: the supervisor's buffer (workers); without it, slots of this thread alone. */
  constructor(
    readonly max: number,
    shared?: SharedArrayBuffer,
    private readonly holder = 1,
  ) {
    this.counts = new Int32Array(shared ?? new ArrayBuffer(8))
  }

  /** The buffer for `holders` workers (ids 1..holders). */
  static shared(holders: number): SharedArrayBuffer {
    return new SharedArrayBuffer(4 * (holders + 1))
  }

  /** One slot; false (nothing taken) when the process holds `max` already. */
  take(): boolean {
    for (;;) {
      const used = Atomics.load(this.counts, 0)
      if (used >= this.max) return false
      if (Atomics.compareExchange(this.counts, 0, used, used + 1) === used) break
    }
    Atomics.add(this.counts, this.holder, 1)
    return true
  }

  give(): void {
    Atomics.sub(this.counts, 0, 1)
    Atomics.sub(this.counts, this.holder, 1)
  }

  /** Held by the whole process now. */
  get total(): number {
    return Atomics.load(this.counts, 0)
  }

  /** Supervisor: give back what worker `holder` held when it ended; returns the count. */
  static releaseOf(shared: SharedArrayBuffer, holder: number): number {
    const counts = new Int32Array(shared)
    const n = Atomics.exchange(counts, holder, 0)
    Atomics.sub(counts, 0, n)
    return n
  }
}
