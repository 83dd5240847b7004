/**
 * Charges settled on the response's status (rules with `count_statuses` or
 * `refund_statuses`, reverse proxy mode): the store call charged them like
 * any other — so a key that used its budget is rejected before anything is
 * forwarded, and concurrent requests of one key never pass it together —
 * and once the response's status is known the ones it does not keep are
 * given back, in one store adjust. `count_statuses` keeps a charge only
 * when the status is one it names; `refund_statuses` gives it back when it
 * is. A request whose status is never known (its client left first) keeps
 * its charges: counting it is the safe side against a client that hangs up
 * to go uncounted.
 */
import type { Adjustment, Outcomes } from '../store/store.js'
import type { StatusCharge } from './decision.js'
import type { Plan } from './plan.js'

/** What a forwarded response settles, told its status once (undefined: never known); one store adjust at most. */
export type SettleStatus = (charges: readonly StatusCharge[], status: number | undefined) => void

/** The committed charges of the plan's rules with a status option: enforce ones (the request is allowed), shadow ones when the shadow group passed. */
export function statusCharges(plan: Plan, outcomes: Outcomes): StatusCharge[] | undefined {
  const { planned, checks } = plan
  let shadowOk = true
  for (let i = 0; i < planned.length; i++) if (planned[i]!.shadow && outcomes[i]?.allowed === false) shadowOk = false
  let out: StatusCharge[] | undefined
  for (let i = 0; i < planned.length; i++) {
    const p = planned[i]!
    const rule = p.rule.statuses
    if (rule === undefined || p.llm !== undefined || outcomes[i]?.allowed !== true || (p.shadow && !shadowOk)) continue
    const c = checks[i]!
    ;(out ??= []).push({
      policyId: p.policy.id,
      ruleName: p.rule.name,
      shadow: p.shadow,
      rule,
      charge: { key: c.key, limit: c.limit, amount: c.cost },
    })
  }
  return out
}

/** The charges a response of `status` gives back (none for a status never known). */
export function refundsFor(charges: readonly StatusCharge[], status: number | undefined): StatusCharge[] {
  if (status === undefined) return []
  return charges.filter((c) => c.rule.matches(status) === (c.rule.kind === 'refund'))
}

/** The adjustments of those refunds, for the one store call. */
export function refundAdjustments(refunds: readonly StatusCharge[]): Adjustment[] {
  return refunds.map((r) => r.charge)
}
