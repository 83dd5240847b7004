/**
 * The checks of one policy that JSON Schema cannot express: host
 * normalisation, selector paths in normalised form, descriptor keys, each algorithm's own config checks
 * (RuleAlgorithm.check: burst ≥ rate, budget stages, enabled guards with
 * their required fields, a concurrency rule where no request end is seen, …), and the warnings for policies whose
 * every rule needs a JWT claim, whose fallback_limit keys on a value a request may lack, or whose
 * circuit breaker one request can open.
 */
import type { BundleUse, ConfigIssue, RuleAlgorithm } from '../algorithms/algorithm.js'
import { CIRCUIT_BREAKER } from '../algorithms/circuit-breaker.js'
import { ALGORITHMS } from '../algorithms/index.js'
import { LOOP_DETECTION } from '../algorithms/loop-detection.js'
import { LLM_PRICE } from '../algorithms/llm-price.js'
import { compileDescriptor, mayBeMissing } from '../request/descriptors.js'
import { breakerReach } from './breaker-reach.js'
import { readPath } from '../request/normalise.js'
import { hostProblem } from './hosts.js'
import type { BundleIssue, GatewayMode, RawPolicy, RawRule } from './types.js'

/** count_statuses / refund_statuses (ours): the gateway must see the response, and the charge must be one it can give back. */
function checkStatuses(rule: RawRule, base: string, mode: GatewayMode, out: BundleIssue[]): void {
  const field = rule.count_statuses !== undefined ? 'count_statuses' : rule.refund_statuses !== undefined ? 'refund_statuses' : undefined
  if (field === undefined) return
  if (mode !== 'reverse_proxy')
    out.push({
      pointer: `${base}/${field}`,
      message: `${field} needs FAIRVISOR_MODE=reverse_proxy: in ${mode} mode the gateway never sees the response, so it cannot tell its status`,
    })
  if (rule.count_statuses !== undefined && rule.refund_statuses !== undefined)
    out.push({
      pointer: `${base}/refund_statuses`,
      message: 'count_statuses and refund_statuses cannot both be set: count_statuses already charges only the statuses it names',
    })
  if (ALGORITHMS.get(rule.algorithm)?.llm === true || rule.algorithm_config?.cost_key === LLM_PRICE)
    out.push({
      pointer: `${base}/${field}`,
      message: `${field} cannot be set on a ${rule.algorithm_config?.cost_key === LLM_PRICE ? 'money budget' : `${rule.algorithm} rule`}: its charge is settled on the response's reported usage, and an error answer is given back already`,
    })
  if (ALGORITHMS.get(rule.algorithm)?.holdRenewS !== undefined)
    out.push({
      pointer: `${base}/${field}`,
      message: `${field} cannot be set on a ${rule.algorithm} rule: its slot is given back when the exchange ends, whatever the status`,
    })
}

function checkRule(rule: RawRule, base: string, use: BundleUse, out: BundleIssue[]): void {
  checkStatuses(rule, base, use.mode, out)
  for (const [i, key] of (rule.limit_keys ?? []).entries()) {
    const d = compileDescriptor(key)
    if (!d.ok) out.push({ pointer: `${base}/limit_keys/${i}`, message: d.message })
  }
  for (const key of Object.keys(rule.match ?? {})) {
    const d = compileDescriptor(key)
    if (!d.ok) out.push({ pointer: `${base}/match/${key.replace(/~/g, '~0').replace(/\//g, '~1')}`, message: d.message })
  }
  const algorithm = ALGORITHMS.get(rule.algorithm)
  if (algorithm !== undefined) checkConfig(algorithm, rule.algorithm_config, `${base}/algorithm_config`, out, use)
}

/** The algorithm's own checks of its config, as issues at pointers under `base`. */
function checkConfig(algorithm: RuleAlgorithm, config: Record<string, unknown>, base: string, out: BundleIssue[], use: BundleUse): void {
  const found: ConfigIssue[] = []
  algorithm.check?.(config, found, use)
  for (const f of found)
    out.push({ pointer: f.field === '' ? base : `${base}/${f.field}`, message: f.message, ...(f.warning ? { warning: true } : {}) })
}

/** True when a rule can only apply to a request that carries a (valid) JWT: it limits or matches on a jwt: claim. */
function needsJwt(r: RawRule): boolean {
  return [...(r.limit_keys ?? []), ...Object.keys(r.match ?? {})].some((k) => k.startsWith('jwt:'))
}

/**
 * The fallback_limit is the policy's last word on a request no rule could limit: a limit key
 * such a request may lack (a header, a query parameter, a claim: docs/behaviour.md §4) leaves it
 * unlimited by the policy, the very request the fallback was written for.
 */
function checkFallbackKeys(fallback: RawRule, base: string, out: BundleIssue[]): void {
  const keys = (fallback.limit_keys ?? []).filter((k) => compileDescriptor(k).ok && mayBeMissing(k))
  if (keys.length === 0) return
  const named = keys.map((k) => `"${k}"`).join(' and ')
  out.push({
    pointer: `${base}/limit_keys`,
    message: `the fallback_limit keys on ${named}, which a request matching this policy may lack (a selector matches on path, method and host only): such a request is then unlimited by this policy; key the fallback_limit on "ip:address", or add a policy that limits by "ip:address"`,
    warning: true,
  })
}

/**
 * Semantic checks of one policy. `clean(pointer)`: the schema found nothing wrong at, above
 * or below that pointer, so its shape is known; parts that are not clean were already reported.
 */
export function checkPolicy(
  p: RawPolicy,
  index: number,
  clean: (pointer: string) => boolean,
  out: BundleIssue[],
  mode: GatewayMode = 'reverse_proxy',
  grpc = false,
): void {
  const base = `/policies/${index}/spec`
  const use: BundleUse = { mode, grpc }
  if (clean(`${base}/selector`)) {
    for (const [i, h] of (p.spec.selector.hosts ?? []).entries()) {
      const problem = hostProblem(h)
      if (problem) out.push({ pointer: `${base}/selector/hosts/${i}`, message: problem })
    }
    for (const field of ['pathExact', 'pathPrefix'] as const) {
      const path = p.spec.selector[field]
      // Requests are matched on their normalised path (docs/behaviour.md §2): a selector that is not one never matches.
      const read = path === undefined ? undefined : readPath(path, 'keep').path
      if (read !== undefined && read !== path)
        out.push({
          pointer: `${base}/selector/${field}`,
          message: `"${path}" is not a normalised path, and requests are matched on theirs: write "${read}"`,
          warning: true,
        })
    }
  }
  const rules = Array.isArray(p.spec.rules) ? p.spec.rules : []
  rules.forEach((r, i) => {
    if (clean(`${base}/rules/${i}`)) checkRule(r, `${base}/rules/${i}`, use, out)
  })
  if (p.spec.fallback_limit && clean(`${base}/fallback_limit`)) checkRule(p.spec.fallback_limit, `${base}/fallback_limit`, use, out)
  // A token that is missing, garbage or fails verification yields no claims: every such rule is skipped.
  if (rules.length > 0 && clean(`${base}/rules`) && rules.every(needsJwt)) {
    // The fallback_limit applies when no rule could be applied (docs/behaviour.md §4), so it covers such requests.
    if (p.spec.fallback_limit === undefined) {
      out.push({
        pointer: `${base}/rules`,
        message:
          'every rule needs a jwt: claim and the policy has no fallback_limit, so a request whose token is missing, garbage or fails verification is not limited by this policy',
        warning: true,
      })
    }
  }
  if (p.spec.fallback_limit && clean(`${base}/fallback_limit`)) checkFallbackKeys(p.spec.fallback_limit, `${base}/fallback_limit`, out)
  const cb = p.spec.circuit_breaker
  if (cb && clean(`${base}/circuit_breaker`)) {
    checkConfig(CIRCUIT_BREAKER as RuleAlgorithm, cb as Record<string, unknown>, `${base}/circuit_breaker`, out, use)
    const threshold = cb.spend_rate_threshold_per_minute
    if (cb.enabled === true && typeof threshold === 'number' && clean(`${base}/rules/0`)) {
      const w = breakerReach(threshold, rules[0], base)
      if (w) out.push(w)
    }
  }
  const loop = p.spec.loop_detection
  if (loop && clean(`${base}/loop_detection`))
    checkConfig(LOOP_DETECTION as RuleAlgorithm, loop as Record<string, unknown>, `${base}/loop_detection`, out, use)
}
