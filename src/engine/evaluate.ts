/**
 * Evaluation of one request (docs/behaviour.md §4): kill switches, route match, per policy its guards and
 * the rules whose match holds (or the fallback), then every limit in one atomic store call. The first
 * enforce reject wins and nothing of the request is spent; shadow policies count on their own keys. */
import type { CompiledBundle, CompiledPolicy, CompiledRule } from '../bundle/compile.js'
import type { RequestView } from '../request/view.js'
import type { Advice, RejectReason } from '../algorithms/algorithm.js'
import type { Check, FailPolicy, Outcomes, Store } from '../store/store.js'
import { loopFingerprint } from './fingerprint.js'
import { retryAfterWithJitter } from './jitter.js'
import { identityOf, killSwitchRetryAfter } from './kill-switch.js'
import type { LimitView } from './headers.js'

export type Reason =
  | 'no_bundle_loaded' | 'no_matching_policy' | 'all_rules_passed' | 'kill_switch'
  | 'service_unavailable' | 'store_unavailable_fail_open' | RejectReason

export interface Decision {
  allowed: boolean
  /** 200 allow, 429 reject, 503 no bundle / store down with fail-closed. */
  status: 200 | 429 | 503
  reason: Reason
  mode: 'enforce' | 'shadow'
  policyId?: string
  ruleName?: string
  /** Headers source: most restrictive enforce limit on allow, the rejecting one on reject. */
  limit?: LimitView
  /** Jittered Retry-After (rejects only). */
  retryAfterS?: number
  /** Counter key and cost of the limit the headers come from (debug log). */
  key?: string
  cost?: number
  /** X-Fairvisor-Warning of an allowed request (budget stage, loop). */
  warning?: Advice['warning']
  /** Hold the allowed request this long before forwarding it (budget throttle, loop throttle). */
  delayMs?: number
  matchedPolicies: readonly string[]
  /** Descriptor key → value of the limits evaluated (debug sessions). */
  descriptors?: Map<string, string>
}

export interface ShadowReject {
  policyId: string
  ruleName: string
  reason: Reason
  key: string
}

export interface PlannedLimit {
  policyId: string
  ruleName: string
  algorithm: string
  /** Full counter key, e.g. `tb:per_ip:10.0.0.1` (`shadow:` in front for shadow policies). */
  key: string
  composite: string
  cost: number
  shadow: boolean
}

/** Thin hooks so the hot path does not format logs or build label objects itself. */
export interface EngineObserver {
  descriptorMissing(key: string, policyId: string, ruleName: string): void
  shadowReject(r: ShadowReject): void
  storeError(err: Error): void
  /** A limit was planned for this request (`fairvisor test` shows it): rule selected, key complete, cost known. */
  limitPlanned?(l: PlannedLimit): void
  /** An allowed request charged `cost` to an enforce limit of `policyId`, leaving the limit's figure `value` (metrics). */
  limitCharged?(policyId: string, cost: number, value: number): void
  /** A loop was detected (count ≥ threshold) on `policyId`, whatever its action. */
  loopDetected?(policyId: string, action: string): void
  /** Every breaker outcome: open (rejecting) or closed, per policy (gauge; a log line on each change). */
  breakerState?(policyId: string, open: boolean): void
  /** Each limit's outcome, in check order (`fairvisor test`). */
  outcome?(index: number, allowed: boolean, value: number, detail: string | undefined): void
}

interface Planned {
  policy: CompiledPolicy
  rule: CompiledRule
  shadow: boolean
  composite: string
}

const NO_BUNDLE: Decision = Object.freeze({ allowed: false, status: 503, reason: 'no_bundle_loaded', mode: 'enforce', matchedPolicies: [] })
const NO_MATCH: Decision = Object.freeze({ allowed: true, status: 200, reason: 'no_matching_policy', mode: 'enforce', matchedPolicies: [] })

export interface EngineOptions {
  store: Store
  failPolicy: FailPolicy
  observer: EngineObserver
  /** Collect descriptor values for debug output (costs a Map per request). */
}

export class Engine {
  constructor(private readonly opts: EngineOptions) {}

  /**
   * The decision for one request: `then` runs once with it, at once with the
   * in-process store (synchronous), else when the store answers. `nowMs` is
   * epoch milliseconds, passed in so tests drive time. A continuation rather
   * than a promise: the proxy's hot path then allocates no promise at all.
   */
  evaluate(bundle: CompiledBundle | null, view: RequestView, nowMs: number, collectDescriptors: boolean, then: (d: Decision) => void): void {
    if (bundle === null) return then(NO_BUNDLE)
    const killed = killSwitchRetryAfter(bundle, view, nowMs)
    if (killed !== undefined) return then({ allowed: false, status: 429, reason: 'kill_switch', mode: 'enforce', retryAfterS: killed, matchedPolicies: [] })
    const matched = bundle.index.match(view.method, view.path, view.host)
    if (matched.length === 0) return then(NO_MATCH)
    const globalShadow = bundle.globalShadowUntil !== undefined && nowMs < bundle.globalShadowUntil
    const checks: Check[] = []
    const planned: Planned[] = []
    const descriptors = collectDescriptors ? new Map<string, string>() : undefined
    for (const policy of matched) {
      const shadow = policy.shadow || globalShadow
      // docs/behaviour.md §4 step 4: loop detection, then the circuit breaker, then the rules.
      if (policy.loop) this.push(policy, policy.loop, shadow, loopFingerprint(policy, view), 1, checks, planned)
      if (policy.breaker) this.push(policy, policy.breaker, shadow, 'spend', policy.rules[0]?.cost(view) ?? 1, checks, planned)
      // The fallback applies when no rule could be applied: none selected, or every selected one
      // skipped for a missing key (a garbage token must not pass unlimited; README).
      let applied = 0
      for (const rule of policy.rules) {
        if (matches(rule, view) && this.plan(policy, rule, shadow, view, checks, planned, descriptors)) applied++
      }
      if (applied === 0 && policy.fallback && matches(policy.fallback, view)) this.plan(policy, policy.fallback, shadow, view, checks, planned, descriptors)
    }
    const ids = matched.map((p) => p.id)
    if (checks.length === 0) return then({ allowed: true, status: 200, reason: 'all_rules_passed', mode: globalShadow ? 'shadow' : 'enforce', matchedPolicies: ids, descriptors })
    this.opts.store.apply(checks, nowMs / 1000, (err, o) => then(err ? this.storeFailed(err, ids) : this.finish(o!, checks, planned, view, ids, descriptors)))
  }

  /** Plans the rule's check; false when it cannot apply (not supported, or a limit key is missing). */
  private plan(policy: CompiledPolicy, rule: CompiledRule, shadow: boolean, view: RequestView, checks: Check[], planned: Planned[], descriptors: Map<string, string> | undefined): boolean {
    if (!rule.supported) return false
    let composite = ''
    for (let i = 0; i < rule.keys.length; i++) {
      const v = rule.keys[i]!(view)
      if (v === undefined) {
        this.opts.observer.descriptorMissing(rule.keyNames[i]!, policy.id, rule.name)
        return false
      }
      descriptors?.set(rule.keyNames[i]!, v)
      composite = i === 0 ? v : `${composite}|${v}`
    }
    this.push(policy, rule, shadow, composite, rule.cost(view), checks, planned)
    return true
  }

  private push(policy: CompiledPolicy, rule: CompiledRule, shadow: boolean, composite: string, cost: number, checks: Check[], planned: Planned[]): void {
    const key = (shadow ? rule.shadowCounterPrefix : rule.counterPrefix) + composite
    checks.push({ key, limit: rule.limit!, cost, shadow })
    this.opts.observer.limitPlanned?.({ policyId: policy.id, ruleName: rule.name, algorithm: rule.algorithm!.name, key, composite, cost, shadow })
    planned.push({ policy, rule, shadow, composite })
  }

  private finish(outcomes: Outcomes, checks: Check[], planned: Planned[], view: RequestView, ids: string[], descriptors: Map<string, string> | undefined): Decision {
    const obs = this.opts.observer
    let best: LimitView | undefined
    let bestPlan: Planned | undefined
    let bestAt = -1
    let advice: Advice | undefined
    let anyEnforce = false
    let rejectedAt = -1
    for (let i = 0; i < planned.length; i++) {
      const o = outcomes[i]
      if (o === undefined) continue
      const p = planned[i]!
      const algorithm = p.rule.algorithm!
      obs.outcome?.(i, o.allowed, o.value, algorithm.describe?.(p.rule.limit!, o.value))
      if (p.rule === p.policy.breaker && !p.shadow) obs.breakerState?.(p.policy.id, !o.allowed)
      if (!o.allowed) {
        if (p.rule === p.policy.loop) obs.loopDetected?.(p.policy.id, 'reject')
        // Shadow counters are charged whatever enforce decides, so every would-be reject is reported.
        if (p.shadow) obs.shadowReject({ policyId: p.policy.id, ruleName: p.rule.name, reason: algorithm.rejectReason, key: checks[i]!.key })
        else if (rejectedAt === -1) rejectedAt = i
        continue
      }
      if (p.shadow || rejectedAt !== -1) continue
      anyEnforce = true
      const a = algorithm.advise?.(p.rule.limit!, o.value)
      if (a !== undefined) {
        if (a.loop) obs.loopDetected?.(p.policy.id, a.delayMs > 0 ? 'throttle' : 'warn')
        if (advice === undefined || a.delayMs > advice.delayMs) advice = a // throttle wins over warn
      }
      const h = algorithm.headers(p.rule.limit!, o.value, o.retryAfter, false)
      if (h !== undefined && (best === undefined || h.remaining < best.remaining)) {
        best = { policyId: p.policy.id, ...h }
        bestPlan = p
        bestAt = i
      }
    }
    if (rejectedAt !== -1) {
      const p = planned[rejectedAt]!
      const o = outcomes[rejectedAt]!
      const algorithm = p.rule.algorithm!
      const reason = algorithm.rejectReason
      const h = algorithm.headers(p.rule.limit!, o.value, o.retryAfter, true)
      return {
        allowed: false,
        status: 429,
        reason,
        mode: 'enforce',
        policyId: p.policy.id,
        ruleName: p.rule.name,
        limit: h && { policyId: p.policy.id, ...h },
        key: checks[rejectedAt]!.key,
        cost: checks[rejectedAt]!.cost,
        retryAfterS: retryAfterWithJitter(o.retryAfter, p.policy.id, p.rule.name, reason, identityOf(view)),
        matchedPolicies: ids,
        descriptors,
      }
    }
    if (obs.limitCharged) {
      // Only now is it known that nothing rejected, i.e. that the charges were committed.
      for (let i = 0; i < planned.length; i++) {
        const o = outcomes[i]
        if (o !== undefined && !planned[i]!.shadow) obs.limitCharged(planned[i]!.policy.id, checks[i]!.cost, o.value)
      }
    }
    return {
      allowed: true,
      status: 200,
      reason: 'all_rules_passed',
      mode: anyEnforce ? 'enforce' : 'shadow',
      policyId: bestPlan?.policy.id,
      ruleName: bestPlan?.rule.name,
      limit: best,
      key: bestAt === -1 ? undefined : checks[bestAt]!.key,
      cost: bestAt === -1 ? undefined : checks[bestAt]!.cost,
      warning: advice?.warning,
      delayMs: advice && advice.delayMs > 0 ? advice.delayMs : undefined,
      matchedPolicies: ids,
      descriptors,
    }
  }

  private storeFailed(err: Error, ids: string[]): Decision {
    this.opts.observer.storeError(err)
    if (this.opts.failPolicy === 'closed') return { allowed: false, status: 503, reason: 'service_unavailable', mode: 'enforce', matchedPolicies: ids }
    return { allowed: true, status: 200, reason: 'store_unavailable_fail_open', mode: 'enforce', matchedPolicies: ids }
  }
}

function matches(rule: CompiledRule, view: RequestView): boolean {
  for (const m of rule.match) {
    if (m.extract(view) !== m.expected) return false
  }
  return true
}
