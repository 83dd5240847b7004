/**
 * The checks of one policy that JSON Schema cannot express: host
 * normalisation, descriptor keys, burst ≥ rate, budget stages, enabled
 * guards with their required fields, and the warning for policies whose
 * every rule needs a JWT claim.
 */
import { compileDescriptor } from '../request/descriptors.js'
import { hostProblem } from './hosts.js'
import type { BundleIssue, RawPolicy, RawRule } from './types.js'

function checkRule(rule: RawRule, base: string, out: BundleIssue[]): void {
  for (const [i, key] of (rule.limit_keys ?? []).entries()) {
    const d = compileDescriptor(key)
    if (!d.ok) out.push({ pointer: `${base}/limit_keys/${i}`, message: d.message, warning: d.unsupported })
  }
  for (const key of Object.keys(rule.match ?? {})) {
    const d = compileDescriptor(key)
    if (!d.ok) out.push({ pointer: `${base}/match/${key.replace(/~/g, '~0').replace(/\//g, '~1')}`, message: d.message, warning: d.unsupported })
  }
  const c = rule.algorithm_config as Record<string, unknown>
  if (rule.algorithm === 'token_bucket') {
    const rate = (c.tokens_per_second ?? c.rps) as number
    if (typeof c.burst === 'number' && c.burst < rate) out.push({ pointer: `${base}/algorithm_config/burst`, message: `burst (${c.burst}) must be at least tokens_per_second (${rate})` })
    else if ((c.cost_source ?? 'fixed') === 'fixed' && typeof c.fixed_cost === 'number' && typeof c.burst === 'number' && c.fixed_cost > c.burst) {
      out.push({ pointer: `${base}/algorithm_config/fixed_cost`, message: `fixed_cost (${c.fixed_cost}) is above burst (${c.burst}), so every request this rule selects is rejected`, warning: true })
    }
    const lease = c.lease as { tokens?: unknown } | undefined
    if (typeof lease?.tokens === 'number' && typeof c.burst === 'number' && lease.tokens >= c.burst) {
      out.push({ pointer: `${base}/algorithm_config/lease/tokens`, message: `lease.tokens (${lease.tokens}) is not below burst (${c.burst}): a slice only fits a full bucket, so the rule is decided by one store call per request most of the time; use a slice well below burst`, warning: true })
    }
  } else if (rule.algorithm === 'cost_based') {
    // Stages are sorted by threshold at load, so file order does not matter; thresholds must differ.
    const stages = c.staged_actions as { threshold_percent: number; action: string }[]
    const seen = new Map<number, number>()
    stages.forEach((s, i) => {
      const first = seen.get(s.threshold_percent)
      if (first !== undefined) out.push({ pointer: `${base}/algorithm_config/staged_actions/${i}/threshold_percent`, message: `staged_actions thresholds must be distinct (${s.threshold_percent} is also stage ${first})` })
      else seen.set(s.threshold_percent, i)
    })
    const rejects = stages.filter((s) => s.action === 'reject')
    if (rejects.length !== 1 || rejects[0]!.threshold_percent !== 100) out.push({ pointer: `${base}/algorithm_config/staged_actions`, message: 'staged_actions must contain exactly one reject action, at threshold_percent 100' })
  } else if (rule.algorithm === 'token_bucket_llm') {
    if (typeof c.burst_tokens === 'number' && c.burst_tokens < (c.tokens_per_minute as number)) out.push({ pointer: `${base}/algorithm_config/burst_tokens`, message: `burst_tokens (${c.burst_tokens}) must be at least tokens_per_minute (${String(c.tokens_per_minute)})` })
    const tpd = c.tokens_per_day, burst = (c.burst_tokens ?? c.tokens_per_minute) as number
    if (typeof tpd === 'number' && tpd < burst) out.push({ pointer: `${base}/algorithm_config/tokens_per_day`, message: `tokens_per_day (${tpd}) is below burst_tokens (${burst}), so the day counter rejects before the minute bucket is ever empty`, warning: true })
  }
}

/** True when a rule can only apply to a request that carries a (valid) JWT: it limits or matches on a jwt: claim. */
function needsJwt(r: RawRule): boolean {
  return [...(r.limit_keys ?? []), ...Object.keys(r.match ?? {})].some((k) => k.startsWith('jwt:'))
}

/**
 * Semantic checks of one policy. `clean(pointer)`: the schema found nothing wrong at, above
 * or below that pointer, so its shape is known; parts that are not clean were already reported.
 */
export function checkPolicy(p: RawPolicy, index: number, clean: (pointer: string) => boolean, out: BundleIssue[]): void {
  const base = `/policies/${index}/spec`
  if (clean(`${base}/selector`)) {
    for (const [i, h] of (p.spec.selector.hosts ?? []).entries()) {
      const problem = hostProblem(h)
      if (problem) out.push({ pointer: `${base}/selector/hosts/${i}`, message: problem })
    }
  }
  const rules = Array.isArray(p.spec.rules) ? p.spec.rules : []
  rules.forEach((r, i) => {
    if (clean(`${base}/rules/${i}`)) checkRule(r, `${base}/rules/${i}`, out)
  })
  if (p.spec.fallback_limit && clean(`${base}/fallback_limit`)) checkRule(p.spec.fallback_limit, `${base}/fallback_limit`, out)
  // A token that is missing, garbage or fails verification yields no claims: every such rule is skipped.
  if (rules.length > 0 && clean(`${base}/rules`) && rules.every(needsJwt)) {
    // The fallback_limit applies when no rule could be applied (README), so it covers such requests.
    if (p.spec.fallback_limit === undefined) {
      out.push({ pointer: `${base}/rules`, message: 'every rule needs a jwt: claim and the policy has no fallback_limit, so a request whose token is missing, garbage or fails verification is not limited by this policy', warning: true })
    }
  }
  const cb = p.spec.circuit_breaker
  if (clean(`${base}/circuit_breaker`) && cb?.enabled && typeof cb.spend_rate_threshold_per_minute !== 'number') out.push({ pointer: `${base}/circuit_breaker`, message: 'an enabled circuit_breaker needs spend_rate_threshold_per_minute' })
  const loop = p.spec.loop_detection
  if (clean(`${base}/loop_detection`) && loop?.enabled && (typeof loop.window_seconds !== 'number' || typeof loop.threshold_identical_requests !== 'number')) out.push({ pointer: `${base}/loop_detection`, message: 'an enabled loop_detection needs window_seconds and threshold_identical_requests' })
}

