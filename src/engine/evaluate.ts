/**
 * Evaluation of one request (docs/behaviour.md §4): kill switches, route match, per policy
 * the rules whose match holds (or the fallback), skip-on-missing-key, then
 * every limit of the request applied in one atomic store call. The first
 * enforce reject wins; nothing of the request is spent on a reject (nor on a
 * request whose limit-key input is ambiguous, refused 400); shadow
 * policies count on their own keys and only log. Planning is in plan.ts
 * (LLM rules: llm-plan.ts), turning outcomes into a Decision in finish.ts.
 * A call that names its limits itself (a Rate Limit Service call) is decided
 * here too (evaluateLimits): same store call, fail policy and observer.
 */
import type { Context } from '@opentelemetry/api'
import type { CompiledBundle, CompiledPolicy, CompiledRule } from '../bundle/compile.js'
import { AmbiguousRequest } from '../errors.js'
import type { TargetRefusal } from '../request/target.js'
import type { RequestView } from '../request/view.js'
import type { ApplyDone, Check, FailPolicy, OnReject, Outcomes, Store } from '../store/store.js'
import type { ChargeRejected } from './read-back.js'
import type { Decision, EngineObserver } from './decision.js'
import { finish } from './finish.js'
import { killSwitchRetryAfter } from './kill-switch.js'
import { Plan } from './plan.js'
import { readBacks, readRejected } from './read-back.js'

const NO_BUNDLE: Decision = Object.freeze({ allowed: false, status: 503, reason: 'no_bundle_loaded', mode: 'enforce', matchedPolicies: [] })
/** A target read two ways by common backends is refused before any policy (docs/behaviour.md §2): never shadowed. */
const REFUSED: Readonly<Record<TargetRefusal, Decision>> = {
  encoded_slash: Object.freeze({ allowed: false, status: 400, reason: 'encoded_slash', mode: 'enforce', matchedPolicies: [] }),
  host_mismatch: Object.freeze({ allowed: false, status: 400, reason: 'host_mismatch', mode: 'enforce', matchedPolicies: [] }),
}
const NO_MATCH: Decision = Object.freeze({ allowed: true, status: 200, reason: 'no_matching_policy', mode: 'enforce', matchedPolicies: [] })

/** The compiled policy a call that names its limits is decided under, and the call as a request (Retry-After jitter, logs). */
export interface LimitTarget {
  policy: CompiledPolicy
  view: RequestView
}

/** One limit such a call names (a Rate Limit Service descriptor): the rule, its counter-key part, its own cost. */
export interface NamedLimit {
  rule: CompiledRule
  composite: string
  cost: number
  shadow: boolean
}

export type { ChargeRejected } from './read-back.js'

export interface EngineOptions {
  store: Store
  failPolicy: FailPolicy
  observer: EngineObserver
  /** FAIRVISOR_LLM_MAX_RETRY_AFTER (s; default 60): an LLM reject waiting longer is answered 403 (engine/llm-reject.ts). */
  llmMaxRetryAfterS?: number
}

/** A request whose limit-key input is ambiguous (errors.ts AmbiguousRequest): refused 400, nothing charged. */
function ambiguous(message: string, ids: string[]): Decision {
  return { allowed: false, status: 400, reason: 'ambiguous_request', mode: 'enforce', message, matchedPolicies: ids }
}

export class Engine {
  constructor(private readonly opts: EngineOptions) {}

  /**
   * The decision for one request: `then` runs once with it, at once with the
   * in-process store (synchronous), else when the store answers. `nowMs` is
   * epoch milliseconds, passed in so tests drive time. A continuation rather
   * than a promise: the proxy's hot path then allocates no promise at all.
   */
  evaluate(
    bundle: CompiledBundle | null,
    view: RequestView,
    nowMs: number,
    collectDescriptors: boolean,
    then: (d: Decision) => void,
  ): void {
    if (view.refused !== undefined) return then(REFUSED[view.refused])
    if (bundle === null) return then(NO_BUNDLE)
    let killed: number | undefined
    try {
      killed = killSwitchRetryAfter(bundle, view, nowMs)
    } catch (err) {
      // A kill switch's scope value in conflicting forms: refused, never let past the switch.
      if (err instanceof AmbiguousRequest) return then(ambiguous(err.message, []))
      throw err
    }
    if (killed !== undefined)
      return then({ allowed: false, status: 429, reason: 'kill_switch', mode: 'enforce', retryAfterS: killed, matchedPolicies: [] })
    const matched = bundle.index.match(view.method, view.path, view.host, view.alsoPaths)
    if (matched.length === 0) return then(NO_MATCH)
    const globalShadow = bundle.globalShadowUntil !== undefined && nowMs < bundle.globalShadowUntil
    const plan = new Plan(view, nowMs, this.opts.observer, collectDescriptors ? new Map<string, string>() : undefined)
    for (const policy of matched) plan.policy(policy, policy.shadow || globalShadow)
    plan.guards()
    const ids = matched.map((p) => p.id)
    const descriptors = plan.descriptors
    if (plan.ambiguous !== undefined) {
      const { policy, ruleName, message } = plan.ambiguous
      return then({ ...ambiguous(message, ids), policyId: policy.id, ruleName })
    }
    if (plan.early !== undefined) {
      // An LLM pre-check (prompt or request size) rejected: nothing else is charged, no store call. The request as
      // sent can never pass, so it is a 400 that no client retries (docs/llm.md "Rejects that end").
      const { policy, rule, reason, message, composite } = plan.early
      this.opts.observer.rejected?.(policy, rule, reason, composite, nowMs)
      return then({
        allowed: false,
        status: 400,
        reason,
        message,
        mode: 'enforce',
        policyId: policy.id,
        ruleName: rule.name,
        matchedPolicies: ids,
        descriptors,
      })
    }
    if (plan.checks.length === 0)
      return then({
        allowed: true,
        status: 200,
        reason: 'all_rules_passed',
        mode: globalShadow ? 'shadow' : 'enforce',
        matchedPolicies: ids,
        descriptors,
      })
    const store = this.opts.store
    const bound = this.opts.llmMaxRetryAfterS
    if (store.applyNow !== undefined) return then(finish(plan, store.applyNow(plan.checks, nowMs / 1000), ids, bound))
    store.apply(
      plan.checks,
      nowMs / 1000,
      (err, o) => then(err ? this.storeFailed(err, ids) : finish(plan, o!, ids, bound)),
      undefined,
      view.trace,
    )
  }

  /**
   * The decision on a call that names its limits itself: `target` is the compiled policy its
   * limits' rules belong to (undefined: none, nothing to check), one check per limit in order,
   * all in one store call. `then` also gets each check's outcome, for front ends that answer per
   * limit. In a group with a reject, every check's counter is read (cost 0) so that its count is
   * known whatever its position, `read` telling which outcomes are such reads; with
   * `chargeRejected` true those checks are first charged their cost regardless of their limit, as
   * envoyproxy/ratelimit increments every descriptor of a rejected call (its default); with a
   * function, those going over (its STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT). The store does it
   * within the same call (store.ts OnReject: a check is going over when, alone on its counter as
   * the call found it, it would be rejected, which the function must agree with); a store that
   * cannot (a Redis Cluster call over several slots) leaves it to further calls (read-back.ts readRejected).
   * Outcomes are undefined when the store failed (the decision then carries the fail policy).
   * `trace`: the call's decision span context when traced (the store call goes under it).
   */
  evaluateLimits(
    target: LimitTarget | undefined,
    limits: readonly NamedLimit[],
    nowMs: number,
    then: (d: Decision, outcomes: Outcomes | undefined, read?: readonly boolean[]) => void,
    chargeRejected: ChargeRejected = false,
    trace?: Context,
  ): void {
    if (target === undefined) return then(NO_MATCH, undefined)
    const { policy, view } = target
    const ids = [policy.id]
    if (limits.length === 0)
      return then({ allowed: true, status: 200, reason: 'all_rules_passed', mode: 'enforce', matchedPolicies: ids }, [])
    const plan = new Plan(view, nowMs, this.opts.observer, undefined)
    for (let i = 0; i < limits.length; i++) {
      const l = limits[i]!
      plan.push(policy, l.rule, l.shadow, l.composite, l.cost)
    }
    const onReject: OnReject = chargeRejected === false ? 'read' : chargeRejected === true ? 'charge' : 'over'
    for (const c of plan.checks) c.onReject = onReject
    const reads: Outcomes = new Array(plan.checks.length)
    this.apply(
      plan.checks,
      nowMs,
      (err, outcomes) => {
        if (err) return then(this.storeFailed(err, ids), undefined)
        const d = finish(plan, outcomes!, ids, this.opts.llmMaxRetryAfterS)
        const read = readBacks(plan.checks, outcomes!, reads)
        if (read !== false) return then(d, outcomes, read)
        readRejected(this.opts.store, plan.checks, outcomes!, nowMs, chargeRejected, (read) => then(d, outcomes, read))
      },
      reads,
      trace,
    )
  }

  private apply(checks: readonly Check[], nowMs: number, done: ApplyDone, reads?: Outcomes, trace?: Context): void {
    const store = this.opts.store
    if (store.applyNow !== undefined) done(null, store.applyNow(checks, nowMs / 1000, reads))
    else store.apply(checks, nowMs / 1000, done, reads, trace)
  }

  private storeFailed(err: Error, ids: string[]): Decision {
    this.opts.observer.storeError(err)
    const storeError = err.message
    if (this.opts.failPolicy === 'closed')
      return { allowed: false, status: 503, reason: 'service_unavailable', mode: 'enforce', matchedPolicies: ids, storeError }
    return { allowed: true, status: 200, reason: 'store_unavailable_fail_open', mode: 'enforce', matchedPolicies: ids, storeError }
  }
}
