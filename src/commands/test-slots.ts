/**
 * Concurrency slots in `fairvisor test`: a sample request's exchange lasts
 * its line's `hold` seconds (default 0: it ends before the next request), so
 * the slots it took are given back at `at + hold` on the run's driven clock,
 * before any later request is decided, as the gateway gives them back when
 * the response ends. A rejected request gives back at once what its shadow
 * rules took.
 */
import type { Decision, HeldSlot } from '../engine/decision.js'
import type { Store } from '../store/store.js'

export class SimulatedSlots {
  /** Exchanges not ended yet: when they end (epoch seconds) and their slots, by end time. */
  private pending: { end: number; slots: readonly HeldSlot[] }[] = []

  constructor(private readonly store: Store) {}

  /** The decision's slots, given back at `end` (epoch seconds; at once for a reject). */
  hold(d: Decision, end: number): void {
    if (d.held === undefined) return
    const at = d.held[0]!.at
    const e = d.allowed ? Math.max(at, end) : at
    let i = this.pending.length
    while (i > 0 && this.pending[i - 1]!.end > e) i--
    this.pending.splice(i, 0, { end: e, slots: d.held })
  }

  /** Ends every exchange whose end is at or before `now` (epoch seconds), in order. */
  endUpTo(now: number): void {
    while (this.pending.length > 0 && this.pending[0]!.end <= now) {
      const { end, slots } = this.pending.shift()!
      this.store.adjust(slots, end, () => undefined) // the in-process store answers at once and never fails
    }
  }
}
