/**
 * Evaluation of one request (docs/behaviour.md §4): kill switches, route match, per policy
 * the rules whose match holds (or the fallback), skip-on-missing-key, then
 * every limit of the request applied in one atomic store call. The first
 * enforce reject wins; nothing of the request is spent on a reject (nor on a
 * request whose limit-key input is ambiguous, refused 400); shadow
 * policies count on their own keys and only log. Planning is in plan.ts
 * (LLM rules: llm-plan.ts), turning outcomes into a Decision in finish.ts.
 */
import type { CompiledBundle } from '../bundle/compile.js'
import { AmbiguousRequest } from '../errors.js'
import type { TargetRefusal } from '../request/target.js'
import type { RequestView } from '../request/view.js'
import type { FailPolicy, Store } from '../store/store.js'
import type { Decision, EngineObserver } from './decision.js'
import { finish } from './finish.js'
import { killSwitchRetryAfter } from './kill-switch.js'
import { Plan } from './plan.js'


const NO_BUNDLE: Decision = Object.freeze({ allowed: false, status: 503, reason: 'no_bundle_loaded', mode: 'enforce', matchedPolicies: [] })
/** A target read two ways by common backends is refused before any policy (docs/behaviour.md §2): never shadowed. */
const REFUSED: Readonly<Record<TargetRefusal, Decision>> = {
  encoded_slash: Object.freeze({ allowed: false, status: 400, reason: 'encoded_slash', mode: 'enforce', matchedPolicies: [] }),
  host_mismatch: Object.freeze({ allowed: false, status: 400, reason: 'host_mismatch', mode: 'enforce', matchedPolicies: [] }),
}
const NO_MATCH: Decision = Object.freeze({ allowed: true, status: 200, reason: 'no_matching_policy', mode: 'enforce', matchedPolicies: [] })

export interface EngineOptions {
  store: Store
  failPolicy: FailPolicy
  observer: EngineObserver
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
      // An LLM pre-check (prompt or request size) rejected: nothing else is charged, no store call.
      const { policy, rule, reason } = plan.early
      return then({
        allowed: false,
        status: 429,
        reason,
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
    if (store.applyNow !== undefined) return then(finish(plan, store.applyNow(plan.checks, nowMs / 1000), ids))
    store.apply(plan.checks, nowMs / 1000, (err, o) => then(err ? this.storeFailed(err, ids) : finish(plan, o!, ids)))
  }

  private storeFailed(err: Error, ids: string[]): Decision {
    this.opts.observer.storeError(err)
    if (this.opts.failPolicy === 'closed')
      return { allowed: false, status: 503, reason: 'service_unavailable', mode: 'enforce', matchedPolicies: ids }
    return { allowed: true, status: 200, reason: 'store_unavailable_fail_open', mode: 'enforce', matchedPolicies: ids }
  }
}
