/**
 * What the two in-process stores (memory/store.ts on one thread, shared/store.ts
 * over a table every worker thread shares) have in common: they answer
 * synchronously, never fail, are ready at once and sweep expired counters
 * once a second. A subclass supplies applyNow, adjust, fill and the sweep.
 */
import type { Adjustment, ApplyDone, Check, Outcomes, Store, StoreState } from './store.js'

export abstract class InProcessStore implements Store {
  readonly kind = 'memory'
  private readonly sweeper: NodeJS.Timeout | undefined

  /** `clock` (epoch ms) starts the sweep timer, every second; no timer without it. */
  constructor(clock: (() => number) | undefined) {
    if (clock) {
      // Runs a second later at the earliest, once the subclass's constructor has set its fields.
      this.sweeper = setInterval(() => this.sweepExpired(clock() / 1000), 1000)
      this.sweeper.unref()
    }
  }

  /** The outcomes of `checks`, evaluated and committed now. */
  abstract applyNow(checks: readonly Check[], now: number): Outcomes

  abstract adjust(adjustments: readonly Adjustment[], now: number, done: (err: Error | null) => void): void

  abstract fill(): { evictions: number; bytesUsed: number; maxBytes: number }

  /** One sweep-timer tick: drop counters that have expired by `now` (seconds). */
  protected abstract sweepExpired(now: number): void

  /** Synchronous: `done` runs before apply() returns. */
  apply(checks: readonly Check[], now: number, done: ApplyDone): void {
    done(null, this.applyNow(checks, now))
  }

  state(): StoreState {
    return 'ok'
  }

  ready(): Promise<boolean> {
    return Promise.resolve(true)
  }

  async close(): Promise<void> {
    if (this.sweeper) clearInterval(this.sweeper)
  }
}
