/**
 * Bounds on what a settlement may charge beyond the reservation
 * (docs/behaviour.md §5 Settlement). Reported usage comes from the upstream's
 * reply, which a misbehaving or compromised upstream (or one a client can
 * steer) may set to anything: `prompt_tokens: 1e15` must not put the minute
 * bucket a geological age in debt (its refill time, and so the Redis TTL,
 * grows with the debt) nor the day counter past any midnight. An overrun
 * (used above reserved) is charged at most the rule's burst on the minute
 * bucket and at most tokens_per_day on the day counter; refunds are never
 * capped (they are bounded by the reservation).
 */
import type { LlmReservation } from '../engine/decision.js'
import type { Adjustment } from '../store/store.js'

export interface OverrunCapped {
  reservation: LlmReservation
  /** Tokens the settlement reported (prompt + completion). */
  reported: number
  /** The extra tokens charged to the minute bucket and the day counter. */
  minuteCharge: number
  dayCharge: number | undefined
}

/**
 * The adjustments that settle `r` at `used` tokens (amount > 0 gives back,
 * < 0 charges more); `capped` is told when an overrun was cut down.
 */
export function settleAdjustments(r: LlmReservation, used: number, capped?: (c: OverrunCapped) => void): Adjustment[] {
  // NaN or -Infinity usage would poison the counters: settle on the reservation.
  const refund = Number.isFinite(used) ? r.reserved - used : 0
  if (refund === 0) return []
  const out: Adjustment[] = []
  const overrun = Math.max(0, -refund)
  const minuteCharge = Math.min(overrun, r.config.burst)
  out.push({ key: r.minute.key, limit: r.minute.limit, amount: refund > 0 ? refund : -minuteCharge })
  let dayCharge: number | undefined
  if (r.day !== undefined) {
    dayCharge = Math.min(overrun, r.config.day?.limit ?? overrun)
    out.push({ key: r.day.key, limit: r.day.limit, amount: refund > 0 ? refund : -dayCharge })
  }
  if (minuteCharge < overrun || (dayCharge !== undefined && dayCharge < overrun))
    capped?.({ reservation: r, reported: used, minuteCharge, dayCharge })
  return out
}
