/**
 * Planning one request: per matched policy loop detection, then the rules
 * whose match holds (or the fallback), each turned into checks for the single
 * store call; the circuit breakers of every policy come last (`guards()`), so
 * a request that any rule rejects never reaches a breaker: the store stops a
 * group at its first reject, and a breaker's opening is the one step that is
 * committed although its group rejects. Most rules give one check;
 * a token_bucket_llm rule gives two (minute bucket, day counter), each with
 * its own reject reason, after two pre-checks that need no store
 * (engine/llm-plan.ts).
 */
import type { Algorithm, Limit, RejectReason } from '../algorithms/algorithm.js'
import { AmbiguousRequest } from '../errors.js'
import type { CompiledPolicy, CompiledRule } from '../bundle/compile.js'
import type { RequestView } from '../request/view.js'
import type { Check } from '../store/store.js'
import type { EngineObserver, LlmReservation, SpendReservation } from './decision.js'
import { loopFingerprint } from './fingerprint.js'
import { planLlm } from './llm-plan.js'
import { planSpend } from './spend-plan.js'

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
  /** Index into Plan.spend when this check is a money budget's reservation. */
  spend?: number
}

/** An enforce rule that rejected before the store call (LLM pre-checks). */
export interface EarlyReject {
  policy: CompiledPolicy
  rule: CompiledRule
  reason: RejectReason
  /** The client's message, with the figures that make the request too large (undefined: the reason's own). */
  message?: string
  /** The rule's limit-key values. */
  composite: string
}

/**
 * One per request, so what most requests never use (LLM reservations,
 * breakers) is allocated on first use: every array a request does not need
 * is garbage the collector would have to sweep at tens of thousands a second.
 */
export class Plan {
  readonly checks: Check[] = []
  readonly planned: Planned[] = []
  /** LLM reservations (reserve()); undefined when no LLM rule applies. */
  llm: LlmReservation[] | undefined = undefined
  /** Money budgets' reservations (reserveSpend()); undefined when none applies. */
  spend: SpendReservation[] | undefined = undefined
  early: EarlyReject | undefined = undefined
  /** A planned rule settles on the response's status (count_statuses / refund_statuses). */
  statuses = false
  /** An enforce policy met an ambiguous limit-key input: the request is refused 400. */
  ambiguous: { policy: CompiledPolicy; ruleName: string; message: string } | undefined = undefined
  /** The rule being planned (the policy id while its loop detection is), for the ambiguity report. */
  private ruleName = ''
  /** Breakers of the planned policies, checked after every rule (guards()). */
  private breakers: { policy: CompiledPolicy; shadow: boolean }[] | undefined = undefined

  constructor(
    readonly view: RequestView,
    readonly nowMs: number,
    readonly observer: EngineObserver,
    readonly descriptors: Map<string, string> | undefined,
  ) {}

  /**
   * Plans one policy. A limit key that finds its input in conflicting forms (AmbiguousRequest)
   * ends the policy's planning: an enforce policy makes the request `400 ambiguous_request`
   * (`ambiguous`), a shadow one only reports that it would refuse it.
   */
  policy(policy: CompiledPolicy, shadow: boolean): void {
    try {
      this.planPolicy(policy, shadow)
    } catch (err) {
      if (!(err instanceof AmbiguousRequest)) throw err
      if (shadow)
        this.observer.shadowReject({ policyId: policy.id, ruleName: this.ruleName, reason: 'ambiguous_request', key: err.message })
      else this.ambiguous ??= { policy, ruleName: this.ruleName, message: err.message }
    }
  }

  private planPolicy(policy: CompiledPolicy, shadow: boolean): void {
    const view = this.view
    this.ruleName = policy.id
    // docs/behaviour.md §4 step 4: loop detection, then the rules; breakers after every policy's rules (guards()).
    if (policy.loop) this.push(policy, policy.loop, shadow, loopFingerprint(policy, view), 1)
    if (policy.breaker) (this.breakers ??= []).push({ policy, shadow })
    // The fallback applies when no rule could be applied: none selected, or every selected one
    // skipped for a missing key (a garbage token must not pass unlimited; README).
    let applied = 0
    for (const rule of policy.rules) {
      this.ruleName = rule.name
      if (matches(rule, view) && this.rule(policy, rule, shadow)) applied++
    }
    const fallback = policy.fallback
    if (applied === 0 && fallback) {
      this.ruleName = fallback.name
      if (matches(fallback, view)) this.rule(policy, fallback, shadow)
    }
  }

  /**
   * The breakers, once every policy is planned. A breaker's spend is the cost of its policy's first
   * rule, capped at that rule's capacity (burst or budget): a client-chosen cost larger than that
   * is rejected by the rule itself, and where the rule does not apply, one request still cannot
   * count for more than a full bucket.
   */
  guards(): void {
    if (this.breakers === undefined) return
    for (const { policy, shadow } of this.breakers) {
      const first = policy.rules[0]
      this.push(policy, policy.breaker!, shadow, 'spend', first ? Math.min(first.cost(this.view), first.costCap) : 1)
    }
  }

  /** Adds an LLM rule's reservation; its index in `llm`. */
  reserve(r: LlmReservation): number {
    this.llm ??= []
    return this.llm.push(r) - 1
  }

  /** Adds a money budget's reservation; its index in `spend`. */
  reserveSpend(r: SpendReservation): number {
    this.spend ??= []
    return this.spend.push(r) - 1
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
    else if (rule.spend !== undefined) planSpend(this, policy, rule, shadow, composite)
    else this.push(policy, rule, shadow, composite, rule.cost(this.view))
    return true
  }

  /** One check on `rule`'s own limit (or `part`, a second limit of the rule, under its own prefix). */
  push(
    policy: CompiledPolicy,
    rule: CompiledRule,
    shadow: boolean,
    composite: string,
    cost: number,
    part?: { algorithm: Algorithm; limit: Limit; key: string; llm: number },
    llm?: number,
    spend?: number,
  ): void {
    const key = part?.key ?? (shadow ? rule.shadowCounterPrefix : rule.counterPrefix) + composite
    const algorithm = part?.algorithm ?? rule.algorithm
    const limit = part?.limit ?? rule.limit
    this.checks.push({ key, limit, cost, shadow })
    if (rule.statuses !== undefined) this.statuses = true
    this.observer.limitPlanned?.({ policyId: policy.id, ruleName: rule.name, algorithm: algorithm.name, key, composite, cost, shadow })
    this.planned.push({ policy, rule, shadow, composite, algorithm, limit, llm: part?.llm ?? llm, spend })
  }
}

export function matches(rule: CompiledRule, view: RequestView): boolean {
  for (const m of rule.match) {
    if (m.extract(view) !== m.expected) return false
  }
  return true
}
