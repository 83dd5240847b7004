/**
 * A token_bucket_llm rule in the documented order: prompt estimate → prompt_tokens_exceeded
 * → reserve the largest of the request's max_tokens / max_completion_tokens / max_output_tokens (or default_max_completion), capped at
 * max_completion_tokens → max_tokens_per_request_exceeded → burst_tokens_exceeded (more than the
 * bucket, or the day counter, can ever hold: it would wait forever) → the minute
 * bucket (tpm_exceeded) and the day counter (tpd_exceeded) as two checks of
 * the request's one store call. The pre-checks reject without a store call;
 * in a shadow policy they are reported and the rule charges nothing (an
 * enforce policy would not have reached its counters either).
 */
import { burstMessage } from '../algorithms/llm-messages.js'
import { LLM_DAY, utcDay, type LlmRejectReason } from '../algorithms/llm.js'
import type { CompiledPolicy, CompiledRule } from '../bundle/compile.js'
import { estimatePrompt } from '../llm/estimate.js'
import { logKey } from './log-key.js'
import type { Algorithm, Limit, RejectReason } from '../algorithms/algorithm.js'
import type { RequestView } from '../request/view.js'
import type { EngineObserver, LlmReservation } from './decision.js'

/** What planning an LLM rule needs of the request's plan (engine/plan.ts), without depending on it. */
export interface LlmPlanTarget {
  readonly view: RequestView
  readonly nowMs: number
  readonly observer: EngineObserver
  /** Adds a reservation; its index. */
  reserve(r: LlmReservation): number
  early: { policy: CompiledPolicy; rule: CompiledRule; reason: RejectReason; message?: string } | undefined
  push(
    policy: CompiledPolicy,
    rule: CompiledRule,
    shadow: boolean,
    composite: string,
    cost: number,
    part?: { algorithm: Algorithm; limit: Limit; key: string; llm: number },
    llm?: number,
  ): void
}

export function planLlm(plan: LlmPlanTarget, policy: CompiledPolicy, rule: CompiledRule, shadow: boolean, composite: string): void {
  const { config: c, dayPrefix, shadowDayPrefix } = rule.llm!
  const body = plan.view.llmBody()
  const prompt = estimatePrompt(c.estimator, c.encoding, body, plan.view.header('x-token-estimate'))
  const asked = body.maxTokens ?? c.defaultMaxCompletion
  const completion = c.maxCompletionTokens === undefined ? asked : Math.min(asked, c.maxCompletionTokens)
  const reserved = prompt + completion
  plan.observer.llmEstimated?.(policy.id, rule.name, prompt, reserved)
  const capacity = Math.min(c.burst, c.day?.limit ?? Infinity)
  let early: LlmRejectReason | undefined
  if (c.maxPromptTokens !== undefined && prompt > c.maxPromptTokens) early = 'prompt_tokens_exceeded'
  else if (c.maxTokensPerRequest !== undefined && reserved > c.maxTokensPerRequest) early = 'max_tokens_per_request_exceeded'
  else if (reserved > capacity) early = 'burst_tokens_exceeded'
  if (early !== undefined) {
    if (shadow)
      plan.observer.shadowReject({
        policyId: policy.id,
        ruleName: rule.name,
        reason: early,
        key: logKey(rule, (shadow ? rule.shadowCounterPrefix : rule.counterPrefix) + composite, composite),
      })
    else
      plan.early ??= {
        policy,
        rule,
        reason: early,
        message: early === 'burst_tokens_exceeded' ? burstMessage(reserved, capacity) : undefined,
      }
    return
  }
  const minuteKey = (shadow ? rule.shadowCounterPrefix : rule.counterPrefix) + composite
  const dayKey = c.day === undefined ? undefined : `${shadow ? shadowDayPrefix : dayPrefix}${composite}:${utcDay(plan.nowMs)}`
  const index = plan.reserve({
    policyId: policy.id,
    ruleName: rule.name,
    shadow,
    config: c,
    minute: { key: minuteKey, limit: c },
    day: dayKey === undefined ? undefined : { key: dayKey, limit: c.day! },
    prompt,
    reserved,
    // Whatever the body said: an upstream may stream anyway (a lax `"stream": "yes"`), and the
    // exchange meters and cuts any text/event-stream answer of an enabled rule.
    streaming: c.streaming.enabled,
  })
  plan.push(policy, rule, shadow, composite, reserved, undefined, index)
  if (dayKey !== undefined)
    plan.push(policy, rule, shadow, composite, reserved, { algorithm: LLM_DAY, limit: c.day!, key: dayKey, llm: index })
}
