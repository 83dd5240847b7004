/**
 * A token_bucket_llm rule in the documented order: a batch or upload is no prompt (nothing
 * planned) → prompt estimate → prompt_tokens_exceeded → the completion asked (the largest of the
 * request's max_tokens / max_completion_tokens / max_output_tokens, or default_max_completion),
 * capped at max_completion_tokens, times `n` / `best_of` → max_tokens_per_request_exceeded → the
 * reservation (that, or less under the rule's `reservation`) → burst_tokens_exceeded (more than the
 * bucket, or the day counter, can ever hold: it would wait forever) → the minute
 * bucket (tpm_exceeded) and the day counter (tpd_exceeded) as two checks of
 * the request's one store call. The pre-checks reject without a store call;
 * in a shadow policy they are reported and the rule charges nothing (an
 * enforce policy would not have reached its counters either).
 */
import { burstMessage } from '../algorithms/llm-messages.js'
import { LLM_DAY, utcDay, type LlmConfig, type LlmRejectReason } from '../algorithms/llm.js'
import type { CompiledPolicy, CompiledRule } from '../bundle/compile.js'
import { completionHistory } from '../llm/completion-history.js'
import { estimatePrompt } from '../llm/estimate.js'
import { notAPrompt } from '../llm/not-prompt.js'
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
  early: { policy: CompiledPolicy; rule: CompiledRule; reason: RejectReason; message?: string; composite: string } | undefined
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

/** Completion tokens one choice reserves under the rule's `reservation`, `worst` being what it may use (asked, capped). */
function perChoice(c: LlmConfig, worst: number, minuteKey: string): number {
  const r = c.reservation
  if (r.mode === 'max_tokens') return worst
  if (r.mode === 'percentile') {
    const seen = completionHistory.percentile(minuteKey, r.p)
    if (seen !== undefined) return Math.min(worst, seen)
  }
  return Math.min(worst, c.defaultMaxCompletion)
}

export function planLlm(plan: LlmPlanTarget, policy: CompiledPolicy, rule: CompiledRule, shadow: boolean, composite: string): void {
  // A batch or an upload is not a prompt: nothing to estimate, reserve or settle (llm/not-prompt.ts).
  if (notAPrompt(plan.view)) return
  const { config: c, dayPrefix, shadowDayPrefix } = rule.llm!
  const body = plan.view.llmBody()
  const minuteKey = (shadow ? rule.shadowCounterPrefix : rule.counterPrefix) + composite
  const prompt = estimatePrompt(c.estimator, c.encoding, body, plan.view.header('x-token-estimate'))
  const asked = body.maxTokens ?? c.defaultMaxCompletion
  // Per choice: `n` (or `best_of`) completions are each generated and billed.
  const worst = c.maxCompletionTokens === undefined ? asked : Math.min(asked, c.maxCompletionTokens)
  const requested = prompt + worst * body.choices
  const reserved = prompt + perChoice(c, worst, minuteKey) * body.choices
  plan.observer.llmEstimated?.(policy.id, rule.name, prompt, reserved)
  const capacity = Math.min(c.burst, c.day?.limit ?? Infinity)
  let early: LlmRejectReason | undefined
  if (c.maxPromptTokens !== undefined && prompt > c.maxPromptTokens) early = 'prompt_tokens_exceeded'
  else if (c.maxTokensPerRequest !== undefined && requested > c.maxTokensPerRequest) early = 'max_tokens_per_request_exceeded'
  else if (reserved > capacity) early = 'burst_tokens_exceeded'
  if (early !== undefined) {
    if (shadow) {
      plan.observer.shadowReject({ policyId: policy.id, ruleName: rule.name, reason: early, key: logKey(rule, minuteKey, composite) })
      plan.observer.rejected?.(policy, rule, early, composite, plan.nowMs)
    } else
      plan.early ??= {
        policy,
        rule,
        reason: early,
        message: early === 'burst_tokens_exceeded' ? burstMessage(reserved, capacity) : undefined,
        composite,
      }
    return
  }
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
    choices: body.choices,
    // Whatever the body said: an upstream may stream anyway (a lax `"stream": "yes"`), and the
    // exchange meters and cuts any text/event-stream answer of an enabled rule.
    streaming: c.streaming.enabled,
  })
  plan.push(policy, rule, shadow, composite, reserved, undefined, index)
  if (dayKey !== undefined)
    plan.push(policy, rule, shadow, composite, reserved, { algorithm: LLM_DAY, limit: c.day!, key: dayKey, llm: index })
}
