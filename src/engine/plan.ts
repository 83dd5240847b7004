/**
 * Planning one request: per matched policy the guards (loop detection,
 * circuit breaker), then the rules whose match holds (or the fallback), each
 * turned into checks for the single store call. Most rules give one check;
 * a token_bucket_llm rule gives two (minute bucket, day counter), each with
 * its own reject reason, after two pre-checks that need no store
 * (engine/llm-plan.ts).
 */
import type { Algorithm, Limit, RejectReason } from '../algorithms/algorithm.js'
import type { CompiledPolicy, CompiledRule } from '../bundle/compile.js'
import type { RequestView } from '../request/view.js'
import type { Check } from '../store/store.js'
import type { EngineObserver, LlmReservation } from './decision.js'
import { planLlm } from './llm-plan.js'

/** One check's origin: the rule, and the algorithm whose reason and headers its outcome takes. */
export interface Planned {
  policy: CompiledPolicy
  rule: CompiledRule
  shadow: boolean
  composite: string
  algorithm: Algorithm
  limit: Limit
  /** Index into Plan.llm when this check is an LLM rule's minute bucket or day counter. */
  llm?: number
}

/** An enforce rule that rejected before the store call (LLM pre-checks). */
export interface EarlyReject {
  policy: CompiledPolicy
  rule: CompiledRule
  reason: RejectReason
}

export class Plan {
  readonly checks: Check[] = []
  readonly planned: Planned[] = []
  readonly llm: LlmReservation[] = []
  early: EarlyReject | undefined = undefined

  constructor(
    readonly view: RequestView,
    readonly nowMs: number,
    readonly observer: EngineObserver,
    readonly descriptors: Map<string, string> | undefined,
  ) {}

  policy(policy: CompiledPolicy, shadow: boolean, fingerprint: (p: CompiledPolicy) => string): void {
    const view = this.view
    // docs/behaviour.md §4 step 4: loop detection, then the circuit breaker, then the rules.
    if (policy.loop) this.push(policy, policy.loop, shadow, fingerprint(policy), 1)
    if (policy.breaker) this.push(policy, policy.breaker, shadow, 'spend', policy.rules[0]?.cost(view) ?? 1)
    // The fallback applies when no rule could be applied: none selected, or every selected one
    // skipped for a missing key (a garbage token must not pass unlimited; README).
    let applied = 0
    for (const rule of policy.rules) {
      if (matches(rule, view) && this.rule(policy, rule, shadow)) applied++
    }
    if (applied === 0 && policy.fallback && matches(policy.fallback, view)) this.rule(policy, policy.fallback, shadow)
  }

  /** Plans the rule's checks; false when it cannot apply (not supported, or a limit key is missing). */
  private rule(policy: CompiledPolicy, rule: CompiledRule, shadow: boolean): boolean {
    if (!rule.supported) return false
    let composite = ''
    for (let i = 0; i < rule.keys.length; i++) {
      const v = rule.keys[i]!(this.view)
      if (v === undefined) {
        this.observer.descriptorMissing(rule.keyNames[i]!, policy.id, rule.name)
        return false
      }
      this.descriptors?.set(rule.keyNames[i]!, v)
      composite = i === 0 ? v : `${composite}|${v}`
    }
    if (rule.llm !== undefined) planLlm(this, policy, rule, shadow, composite)
    else this.push(policy, rule, shadow, composite, rule.cost(this.view))
    return true
  }

  /** One check on `rule`'s own limit (or `part`, a second limit of the rule, under its own prefix). */
  push(policy: CompiledPolicy, rule: CompiledRule, shadow: boolean, composite: string, cost: number, part?: { algorithm: Algorithm; limit: Limit; key: string; llm: number }, llm?: number): void {
    const key = part?.key ?? (shadow ? rule.shadowCounterPrefix : rule.counterPrefix) + composite
    const algorithm = part?.algorithm ?? rule.algorithm!
    const limit = part?.limit ?? rule.limit!
    this.checks.push({ key, limit, cost, shadow })
    this.observer.limitPlanned?.({ policyId: policy.id, ruleName: rule.name, algorithm: algorithm.name, key, composite, cost, shadow })
    this.planned.push({ policy, rule, shadow, composite, algorithm, limit, llm: part?.llm ?? llm })
  }
}

export function matches(rule: CompiledRule, view: RequestView): boolean {
  for (const m of rule.match) {
    if (m.extract(view) !== m.expected) return false
  }
  return true
}
