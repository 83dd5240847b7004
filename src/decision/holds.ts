/**
 * Requests held for their debt (`max_delay_ms`: a token bucket's, a sliding
 * window's): the store call already charged them ahead of time, and the
 * request is forwarded (or, in the decision service, answered) once the wait
 * is over.
 *
 * A held request takes a slot of the process's FAIRVISOR_MAX_DELAYED
 * (hold-slots.ts) for its wait. Without a free slot it is refused instead —
 * the reject its limit would have given without a delay — and its charges
 * are given back, so nothing of a refused request is kept, as for any reject.
 * A held request whose client leaves gives its charges back too (one store
 * adjust). The wait is a timer: nothing blocks, no store call is held open.
 * Budget and loop throttles are not debts: front ends hold them on a timer
 * of their own (http/respond.ts afterDelay), outside this bound.
 */
import type { Debt, Decision, HeldRequest } from '../engine/decision.js'
import type { Adjustment } from '../store/store.js'
import type { HoldSlots } from './hold-slots.js'

/** How a held request ended: forwarded once its tokens arrived, abandoned by its client, or refused for want of a slot. */
export type HoldEnd = 'forwarded' | 'abandoned' | 'refused'

export interface HoldHooks {
  /** Give charges back: one store adjust (its failure is the hook's to report). */
  giveBack(charges: readonly Adjustment[]): void
  /** A request was held for `waitMs` (metrics). */
  held?(policyId: string, waitMs: number): void
  ended?(policyId: string, end: HoldEnd): void
}

const HELD = 0
/** The tokens have arrived; the front end is being told (it may still find its client gone). */
const OVER = 1
const FORWARDED = 2
const ABANDONED = 3

class Hold implements HeldRequest {
  private state = HELD
  private waiter: (() => void) | undefined = undefined
  private readonly timer: NodeJS.Timeout
  /** When the hold began (performance.now()): a sliding window's held charge is given back by how much of its wait is left. */
  private readonly since = performance.now()

  constructor(
    private readonly holds: Holds,
    private readonly debt: Debt,
    waitMs: number,
  ) {
    this.timer = setTimeout(over, waitMs, this)
  }

  then(go: () => void): void {
    if (this.state === HELD) this.waiter = go
    else if (this.state !== ABANDONED) go()
  }

  abandon(): void {
    if (this.state === FORWARDED || this.state === ABANDONED) return
    if (this.state === HELD) {
      clearTimeout(this.timer)
      this.holds.slots.give()
    }
    this.state = ABANDONED
    this.waiter = undefined
    this.holds.hooks.giveBack(this.debt.chargesAfter?.(performance.now() - this.since) ?? this.debt.charges)
    this.holds.hooks.ended?.(this.debt.policyId, 'abandoned')
  }

  /** The tokens have arrived: the slot is free, the front end forwards (or finds its client gone and abandons). */
  over(): void {
    this.state = OVER
    this.holds.slots.give()
    const go = this.waiter
    this.waiter = undefined
    go?.()
    if (this.state !== OVER) return
    this.state = FORWARDED
    this.holds.hooks.ended?.(this.debt.policyId, 'forwarded')
  }
}

function over(h: Hold): void {
  h.over()
}

export class Holds {
  constructor(
    readonly slots: HoldSlots,
    readonly hooks: HoldHooks,
  ) {}

  /**
   * A decision with a debt (engine/debt.ts), held: the same decision with its `hold` set, or,
   * when the process holds as many requests as it may, the refusal, its charges given back.
   */
  hold(d: Decision): Decision {
    const debt = d.debt!
    if (!this.slots.take()) {
      this.hooks.giveBack(debt.charges)
      this.hooks.ended?.(debt.policyId, 'refused')
      return debt.refused
    }
    this.hooks.held?.(debt.policyId, d.delayMs!)
    d.hold = new Hold(this, debt, d.delayMs!)
    return d
  }
}
