/**
 * An allowed request charged ahead of time (`max_delay_ms`: a token bucket's
 * debt, a sliding window's count for the instant it fits): what holding it
 * needs (decision/holds.ts).
 * Built only for such a request, never on the plain allow path: the wait, the
 * charges to give back when it is not forwarded (its client left, or the
 * process holds as many as FAIRVISOR_MAX_DELAYED), and the decision it gets
 * when it cannot be held — a reject by the limit in debt, as if the limit had
 * no delay.
 */
import type { Adjustment, Outcomes } from '../store/store.js'
import type { Debt, Decision } from './decision.js'
import { retryAfterWithJitter } from './jitter.js'
import { identityOf } from './kill-switch.js'
import { logKey } from './log-key.js'
import type { Plan } from './plan.js'

/** Check `i` takes a concurrency slot its front end gives back when the exchange ends (http/slot-holds.ts), reject or not. */
function holdsSlot(plan: Plan, i: number): boolean {
  const p = plan.planned[i]!
  return p.algorithm.holdRenewS?.(p.limit) !== undefined
}

/**
 * `at`: the check whose debt is the longest wait, `waitMs` that wait; `allowed`: the decision
 * made. The charges are every enforce check of the request but its LLM and money reservations, which
 * their own exchange gives back (a reject's or an abandoned request's `tap.end(false)`), and its
 * concurrency slots, which go back when the exchange ends (a closed connection, or at once with
 * the refusal) — given back twice, a slot would free another request's.
 */
export function debtOf(plan: Plan, outcomes: Outcomes, at: number, waitMs: number, allowed: Decision): Debt {
  const { planned, checks } = plan
  let timed = false
  /** The charges given back `elapsedS` after the decision: a kind may give back by its outcome (a sliding window's held charge). */
  const chargesAt = (elapsedS: number): Adjustment[] => {
    const out: Adjustment[] = []
    for (let i = 0; i < planned.length; i++) {
      const p = planned[i]!
      const o = outcomes[i]
      if (p.shadow || p.llm !== undefined || p.spend !== undefined || o?.allowed !== true || holdsSlot(plan, i)) continue
      const c = checks[i]!
      const limit = c.limit.kind.giveBack?.(c.limit, o, elapsedS)
      if (limit !== undefined) timed = true
      out.push({ key: c.key, limit: limit ?? c.limit, amount: c.cost })
    }
    return out
  }
  const charges = chargesAt(0)
  const p = planned[at]!
  const o = outcomes[at]!
  const reason = p.algorithm.rejectReason
  const retry = Math.max(1, Math.ceil(waitMs / 1000))
  const h = p.algorithm.headers(p.limit, o.value, retry, true)
  const refused: Decision = {
    allowed: false,
    status: 429,
    reason,
    mode: 'enforce',
    policyId: p.policy.id,
    ruleName: p.rule.name,
    limit: h && { policyId: p.policy.id, limit: h.limit, remaining: h.remaining, resetS: h.resetS, windowS: h.windowS },
    key: logKey(p.rule, checks[at]!.key, p.composite),
    cost: checks[at]!.cost,
    retryAfterS: retryAfterWithJitter(retry, p.policy.id, p.rule.name, reason, identityOf(plan.view)),
    matchedPolicies: allowed.matchedPolicies,
    descriptors: allowed.descriptors,
    // Its LLM reservations go back with the reject (the proxy's exchange ends unforwarded), its concurrency slots too.
    llm: allowed.llm,
    spend: allowed.spend,
    held: allowed.held,
  }
  const debt: Debt = { waitMs, charges, refused, policyId: p.policy.id }
  if (timed) debt.chargesAfter = (elapsedMs) => chargesAt(elapsedMs / 1000)
  return debt
}
