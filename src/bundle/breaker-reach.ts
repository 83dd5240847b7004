/**
 * The warning for a circuit breaker one request can open. A breaker counts
 * the cost of its policy's first rule, capped at that rule's capacity
 * (engine/plan.ts guards()), and opens when the spend per minute reaches its
 * threshold: a threshold at or below the largest cost one request can carry
 * lets one client's single request reject every client of the policy until
 * the breaker resets.
 */
import { ALGORITHMS } from '../algorithms/index.js'
import type { BundleIssue, RawRule } from './types.js'

/** The most one request can count towards the breaker on `first`, and why, in words. */
function largestCost(first: RawRule | undefined): { cost: number; why: string } {
  if (first === undefined) return { cost: 1, why: 'the policy has no rule, so each request counts 1' }
  const algorithm = ALGORITHMS.get(first.algorithm)
  const c = first.algorithm_config
  const source = String((algorithm?.costField === undefined ? undefined : c[algorithm.costField]) ?? 'fixed')
  const cap = algorithm?.capacity?.(algorithm.normalise(c)) ?? Infinity
  const rule = `rule "${first.name}"`
  if (source.startsWith('header:') || source.startsWith('query:'))
    return { cost: cap, why: `the client sets the cost of ${rule} in ${source}, up to its capacity` }
  const fixed = Number(c.fixed_cost ?? 1)
  return fixed <= cap ? { cost: fixed, why: `the fixed cost of ${rule}` } : { cost: cap, why: `the capacity of ${rule}` }
}

/** A warning when one request can reach the breaker's threshold; `base`: the policy's spec pointer. */
export function breakerReach(threshold: number, first: RawRule | undefined, base: string): BundleIssue | undefined {
  const { cost, why } = largestCost(first)
  if (threshold > cost) return undefined
  return {
    pointer: `${base}/circuit_breaker/spend_rate_threshold_per_minute`,
    message: `spend_rate_threshold_per_minute (${threshold}) is not above the cost one request can count (${cost}: ${why}), so a single request opens the breaker for every client of the policy; set it above ${cost}, and above what one client may spend in a minute if one client alone should not open it`,
    warning: true,
  }
}
