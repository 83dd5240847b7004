/**
 * A cost_based budget counted in money (`"cost_key": "llm_price"`, algorithms/llm-price.ts):
 * the model (llm:model) → its price in the bundle's llm_prices → the reservation, the prompt
 * estimate at the input price plus the output the body asks for (max_tokens and its kin, else
 * default_max_completion) at the output price, in micros → `cost_per_request_exceeded` when that
 * alone is above max_cost_per_request (or the whole budget: it could never pass), without a store
 * call → one check on the budget's counter, charged the reservation, in the request's one store
 * call. The charge is settled on the reported usage after the response (llm/spend-settle.ts).
 */
import type { CompiledPolicy, CompiledRule } from '../bundle/compile.js'
import { estimatePrompt } from '../llm/estimate.js'
import { notAPrompt } from '../llm/not-prompt.js'
import { costMicros } from '../llm/prices.js'
import type { SpendReservation } from './decision.js'
import type { LlmPlanTarget } from './llm-plan.js'
import { logKey } from './log-key.js'

/** What planning a money budget needs of the request's plan (engine/plan.ts). */
export interface SpendPlanTarget extends Omit<LlmPlanTarget, 'reserve' | 'push'> {
  /** Adds a money reservation; its index. */
  reserveSpend(r: SpendReservation): number
  push(
    policy: CompiledPolicy,
    rule: CompiledRule,
    shadow: boolean,
    composite: string,
    cost: number,
    part?: undefined,
    llm?: undefined,
    spend?: number,
  ): void
}

export function planSpend(plan: SpendPlanTarget, policy: CompiledPolicy, rule: CompiledRule, shadow: boolean, composite: string): void {
  // A batch or an upload is not a call priced here (llm/not-prompt.ts).
  if (notAPrompt(plan.view)) return
  const { money, prices } = rule.spend!
  const view = plan.view
  const body = view.llmBody()
  const model = view.llmModel()
  const price = prices.priceOf(model)
  const prompt = estimatePrompt(money.estimator, money.encoding, body, view.header('x-token-estimate'))
  // `n` (or `best_of`) completions are each billed (llm/request-body.ts).
  const completion = (body.maxTokens ?? money.defaultMaxCompletion) * body.choices
  const reserved = costMicros(price, { input: prompt, cachedInput: 0, cacheWrite: 0, output: completion })
  const key = (shadow ? rule.shadowCounterPrefix : rule.counterPrefix) + composite
  if (reserved > money.maxCostMicros) {
    const reason = 'cost_per_request_exceeded'
    if (shadow) {
      plan.observer.shadowReject({ policyId: policy.id, ruleName: rule.name, reason, key: logKey(rule, key, composite) })
      plan.observer.rejected?.(policy, rule, reason, composite, plan.nowMs)
    } else plan.early ??= { policy, rule, reason, composite }
    return
  }
  const index = plan.reserveSpend({
    policyId: policy.id,
    ruleName: rule.name,
    shadow,
    key,
    limit: rule.limit,
    model,
    price,
    currency: prices.currency,
    prompt,
    completion,
    reserved,
    budget: rule.costCap,
  })
  plan.push(policy, rule, shadow, composite, reserved, undefined, undefined, index)
}
