/**
 * The bytes the gRPC listener's unfinished requests hold, against
 * FAIRVISOR_GRPC_MAX_BUFFERED_BYTES, for the whole process: with worker
 * threads every thread charges one count in a SharedArrayBuffer made by the
 * supervisor, so the bound is the process's, not a thread's.
 *
 * Layout (Int32): [0] the total, [h] what holder h (a worker id, 1-based;
 * 1 for a single thread) holds. The total is taken with compare-and-swap, so it never
 * passes the ceiling; a holder's own count lets the supervisor give back what
 * a worker that died held (`releaseOf`), and is that thread's share of the
 * gauge (/metrics sums the workers').
 */

/** A stream holding more than this is "large": it may not take the last eighth of the budget. */
export const SMALL_REQUEST_BYTES = 64 * 1024

/** The largest budget a 32-bit count holds with room to spare. */
export const MAX_BUDGET_BYTES = 1024 ** 3

export class ByteBudget {
  private readonly counts: Int32Array
  /**
   * Large streams stop at `limit - limit / 8`: a flood of big unfinished messages leaves the last eighth to
   * ordinary calls (a few KiB each), which then still get through; the whole stays within `limit`.
   */
  private readonly largeCeiling: number

  /** `shared`: the supervisor's buffer (workers); without it a budget of this thread alone. */
  constructor(
    readonly limit: number,
    shared?: SharedArrayBuffer,
    private readonly holder = 1,
  ) {
    this.counts = new Int32Array(shared ?? new ArrayBuffer(8))
    this.largeCeiling = limit - Math.floor(limit / 8)
  }

  /** The buffer for `holders` workers (ids 1..holders). */
  static shared(holders: number): SharedArrayBuffer {
    return new SharedArrayBuffer(4 * (holders + 1))
  }

  /** Charges `n` more bytes to a stream that holds `held`; false (nothing charged) when that would pass its ceiling. */
  take(n: number, held: number): boolean {
    const ceiling = held + n > SMALL_REQUEST_BYTES ? this.largeCeiling : this.limit
    for (;;) {
      const used = Atomics.load(this.counts, 0)
      if (used + n > ceiling) return false
      if (Atomics.compareExchange(this.counts, 0, used, used + n) === used) break
    }
    Atomics.add(this.counts, this.holder, n)
    return true
  }

  give(n: number): void {
    if (n === 0) return
    Atomics.sub(this.counts, 0, n)
    Atomics.sub(this.counts, this.holder, n)
  }

  /** What this thread holds now. */
  get held(): number {
    return Atomics.load(this.counts, this.holder)
  }

  /** Supervisor: give back what worker `holder` held when it ended; returns the bytes. */
  static releaseOf(shared: SharedArrayBuffer, holder: number): number {
    const counts = new Int32Array(shared)
    const n = Atomics.exchange(counts, holder, 0)
    Atomics.sub(counts, 0, n)
    return n
  }
}

/**
 * One stream's request bytes, each chunk charged to the budget as it arrives. `release` gives back what is
 * charged and is idempotent: every way a stream ends (whole request, refusal, reset, deadline, session closed)
 * calls it, and only the first gives anything back.
 */
export class HeldBody {
  private first: Buffer | undefined
  private parts: Buffer[] | undefined
  private charged = 0

  constructor(
    private readonly budget: ByteBudget,
    private readonly maxBytes: number,
  ) {}

  /** Keeps `chunk`; or, when the stream's own limit or the budget refuses it, releases everything and says which. */
  add(chunk: Buffer): 'kept' | 'too-large' | 'budget' {
    const refused =
      this.charged + chunk.length > this.maxBytes ? 'too-large' : this.budget.take(chunk.length, this.charged) ? undefined : 'budget'
    if (refused) {
      this.release()
      return refused
    }
    this.charged += chunk.length
    if (this.first === undefined) this.first = chunk
    else (this.parts ??= [this.first]).push(chunk)
    return 'kept'
  }

  /** The whole body, no longer charged: from here it is one call's decoding, not an unfinished request. */
  take(): Buffer {
    const body = this.parts ? Buffer.concat(this.parts) : (this.first ?? Buffer.alloc(0))
    this.release()
    return body
  }

  release(): void {
    this.budget.give(this.charged)
    this.charged = 0
    this.first = this.parts = undefined
  }
}
