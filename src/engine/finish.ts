/**
 * The store's outcomes → the Decision: the first enforce reject wins (its
 * algorithm's reason and headers, jittered Retry-After); otherwise allow with
 * the headers of the most restrictive enforce limit, warn/throttle advice,
 * and the LLM reservations and concurrency slots whose group was committed. A check the store had
 * no room for (`full`) is refused 503 store_full, not over its limit.
 */
import type { Advice, HeaderValues } from '../algorithms/algorithm.js'
import type { Outcomes } from '../store/store.js'
import { debtOf } from './debt.js'
import type { Decision, HeldSlot, LlmReservation, SpendReservation } from './decision.js'
import type { LimitView } from './headers.js'
import { retryAfterWithJitter } from './jitter.js'
import { identityOf } from './kill-switch.js'
import { boundLlmReject, DEFAULT_LLM_MAX_RETRY_AFTER_S } from './llm-reject.js'
import { logKey } from './log-key.js'
import type { Plan, Planned } from './plan.js'
import { statusCharges } from './status-charges.js'

/** Whether the shadow group was committed: none of its checks rejected. */
function shadowCommitted(plan: Plan, outcomes: Outcomes): boolean {
  for (let i = 0; i < plan.planned.length; i++) if (plan.planned[i]!.shadow && outcomes[i]?.allowed === false) return false
  return true
}

/** The reservations committed (LLM or money): enforce ones when the enforce group passed, shadow ones when the shadow group did. */
function committed<R extends LlmReservation | SpendReservation>(
  list: R[] | undefined,
  plan: Plan,
  outcomes: Outcomes,
  enforceOk: boolean,
): R[] | undefined {
  if (list === undefined) return undefined
  const shadowOk = shadowCommitted(plan, outcomes)
  const out = list.filter((r) => (r.shadow ? shadowOk : enforceOk))
  return out.length ? out : undefined
}

/** The concurrency slots committed (as committed): checks whose algorithm holds its charge until the exchange ends. */
function committedHeld(plan: Plan, outcomes: Outcomes, enforceOk: boolean): HeldSlot[] | undefined {
  const { planned, checks } = plan
  let out: HeldSlot[] | undefined
  for (let i = 0; i < planned.length; i++) {
    const p = planned[i]!
    if (p.algorithm.holdRenewS === undefined || outcomes[i]?.allowed !== true) continue
    const renewS = p.algorithm.holdRenewS(p.limit)
    if (renewS === undefined || !(p.shadow ? shadowCommitted(plan, outcomes) : enforceOk)) continue
    const c = checks[i]!
    const slot: HeldSlot = { key: c.key, limit: c.limit, amount: c.cost, at: plan.nowMs / 1000, policyId: p.policy.id, renewS }
    // A literal of one: `[].push` would first give the array room for 17 (garbage once per request).
    if (out === undefined) out = [slot]
    else out.push(slot)
  }
  return out
}

/** The headers' values with their policy; fields spelled out, not spread (`{ id, ...h }` is a slow generic copy in V8). */
function limitView(policyId: string, h: HeaderValues): LimitView {
  return { policyId, limit: h.limit, remaining: h.remaining, resetS: h.resetS, windowS: h.windowS }
}

/** `llmMaxRetryAfterS`: FAIRVISOR_LLM_MAX_RETRY_AFTER, the longest wait an LLM reject tells a client to retry after. */
export function finish(plan: Plan, outcomes: Outcomes, ids: string[], llmMaxRetryAfterS = DEFAULT_LLM_MAX_RETRY_AFTER_S): Decision {
  const { planned, checks, observer: obs, view, descriptors } = plan
  let best: LimitView | undefined
  let bestPlan: Planned | undefined
  let bestAt = -1
  let advice: Advice | undefined
  /** The longest wait for tokens charged ahead of time (max_delay_ms), and its check. */
  let debtMs = 0
  let debtAt = -1
  let anyEnforce = false
  let rejectedAt = -1
  for (let i = 0; i < planned.length; i++) {
    const o = outcomes[i]
    if (o === undefined) continue
    const p = planned[i]!
    const algorithm = p.algorithm
    obs.outcome?.(i, o.allowed, o.value, algorithm.describe?.(p.limit, o.value))
    // A refusal for want of room says nothing of the breaker or a loop.
    if (p.rule === p.policy.breaker && !p.shadow && o.full !== true) obs.breakerState?.(p.policy.id, !o.allowed)
    if (!o.allowed) {
      if (p.rule === p.policy.loop && o.full !== true) obs.loopDetected?.(p.policy.id, 'reject')
      // Shadow counters are charged whatever enforce decides, so every would-be reject is reported.
      if (p.shadow) {
        const reason = o.full === true ? 'store_full' : algorithm.rejectReason
        obs.shadowReject({ policyId: p.policy.id, ruleName: p.rule.name, reason, key: logKey(p.rule, checks[i]!.key, p.composite) })
        obs.rejected?.(p.policy, p.rule, reason, p.composite, plan.nowMs)
      } else if (rejectedAt === -1) rejectedAt = i
      continue
    }
    if (p.shadow || rejectedAt !== -1) continue
    anyEnforce = true
    const a = algorithm.advise?.(p.limit, o.value, o.retryAfter)
    if (a !== undefined) {
      if (a.loop) obs.loopDetected?.(p.policy.id, a.delayMs > 0 ? 'throttle' : 'warn')
      if (a.debt) {
        if (a.delayMs > debtMs) {
          debtMs = a.delayMs
          debtAt = i
        }
      } else if (advice === undefined || a.delayMs > advice.delayMs) advice = a // throttle wins over warn
    }
    const h = algorithm.headers(p.limit, o.value, o.retryAfter, false)
    if (h !== undefined && (best === undefined || h.remaining < best.remaining)) {
      best = limitView(p.policy.id, h)
      bestPlan = p
      bestAt = i
    }
  }
  if (rejectedAt !== -1) {
    const p = planned[rejectedAt]!
    const o = outcomes[rejectedAt]!
    obs.rejected?.(p.policy, p.rule, o.full === true ? 'store_full' : p.algorithm.rejectReason, p.composite, plan.nowMs)
    if (o.full === true)
      return {
        allowed: false,
        status: 503,
        reason: 'store_full',
        mode: 'enforce',
        policyId: p.policy.id,
        ruleName: p.rule.name,
        key: logKey(p.rule, checks[rejectedAt]!.key, p.composite),
        cost: checks[rejectedAt]!.cost,
        retryAfterS: o.retryAfter,
        matchedPolicies: ids,
        descriptors,
        llm: committed(plan.llm, plan, outcomes, false),
        spend: committed(plan.spend, plan, outcomes, false),
        held: committedHeld(plan, outcomes, false),
      }
    const reason = p.algorithm.rejectReason
    const h = p.algorithm.headers(p.limit, o.value, o.retryAfter, true)
    const d: Decision = {
      allowed: false,
      status: 429,
      reason,
      mode: 'enforce',
      policyId: p.policy.id,
      ruleName: p.rule.name,
      limit: h && limitView(p.policy.id, h),
      key: logKey(p.rule, checks[rejectedAt]!.key, p.composite),
      cost: checks[rejectedAt]!.cost,
      retryAfterS: retryAfterWithJitter(o.retryAfter, p.policy.id, p.rule.name, reason, identityOf(view)),
      matchedPolicies: ids,
      descriptors,
      llm: committed(plan.llm, plan, outcomes, false),
      spend: committed(plan.spend, plan, outcomes, false),
      held: committedHeld(plan, outcomes, false),
    }
    return p.llm === undefined && p.spend === undefined ? d : boundLlmReject(d, o.retryAfter, llmMaxRetryAfterS)
  }
  if (obs.limitCharged) {
    // Only now is it known that nothing rejected, i.e. that the charges were committed.
    for (let i = 0; i < planned.length; i++) {
      const o = outcomes[i]
      const p = planned[i]!
      // An LLM rule reports once (its minute bucket); what it consumed is known at settlement.
      if (o !== undefined && !p.shadow && (p.llm === undefined || p.limit === p.rule.limit))
        obs.limitCharged(
          p.policy.id,
          checks[i]!.cost,
          o.value,
          p.llm !== undefined || p.spend !== undefined || p.rule.statuses !== undefined,
        )
    }
  }
  const delayMs = Math.max(advice?.delayMs ?? 0, debtMs)
  const d: Decision = {
    allowed: true,
    status: 200,
    reason: 'all_rules_passed',
    mode: anyEnforce ? 'enforce' : 'shadow',
    policyId: bestPlan?.policy.id,
    ruleName: bestPlan?.rule.name,
    limit: best,
    key: bestAt === -1 ? undefined : logKey(bestPlan!.rule, checks[bestAt]!.key, bestPlan!.composite),
    cost: bestAt === -1 ? undefined : checks[bestAt]!.cost,
    warning: advice?.warning,
    delayMs: delayMs > 0 ? delayMs : undefined,
    matchedPolicies: ids,
    descriptors,
    llm: committed(plan.llm, plan, outcomes, true),
    spend: committed(plan.spend, plan, outcomes, true),
    held: committedHeld(plan, outcomes, true),
  }
  if (plan.statuses) d.statusCharges = statusCharges(plan, outcomes)
  if (debtAt !== -1) d.debt = debtOf(plan, outcomes, debtAt, debtMs, d)
  return d
}
