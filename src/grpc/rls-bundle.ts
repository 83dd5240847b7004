/**
 * Bundles limiting Rate Limit Service calls: each descriptor of a
 * ShouldRateLimit call is decided by the bundle as a request `POST /<domain>`
 * whose `descriptor:<key>` values are the descriptor's entries, so a
 * Fairvisor policy (any algorithm, shadow, kill switches) can limit what
 * Envoy's rate limit filter asks about.
 */
import type { Decision } from '../engine/decision.js'
import type { Decide } from '../decision/decide.js'
import { readPath } from '../request/normalise.js'
import type { Entry } from './rls-match.js'
import { OVER_LIMIT, type DescriptorStatus } from './rls-service.js'

export function decideDescriptors(
  decide: Decide,
  domain: string,
  descriptors: ReadonlyArray<{ entries: Entry[] }>,
  then: (ds: Decision[]) => void,
): void {
  const out: Decision[] = new Array(descriptors.length)
  let left = descriptors.length
  // Read as a request path is (request/normalise.ts), so selectors see it as they see every path.
  const path = readPath(`/${domain}`, 'keep').path
  descriptors.forEach((d, i) => {
    const input = {
      method: 'POST',
      path,
      rawQuery: '',
      host: '',
      rawHeaders: [],
      peer: '',
      descriptorEntries: new Map(d.entries.map((e) => [e.key, e.value])),
    }
    decide(input, false, (decision) => {
      out[i] = decision
      if (--left === 0) then(out)
    })
  })
}

/** The bundle's decision folded into a descriptor's status: a reject (or a fail-closed store) is OVER_LIMIT. */
export function mergeDecision(s: DescriptorStatus, d: Decision): DescriptorStatus {
  if (d.reason === 'no_bundle_loaded') return s
  const over = !d.allowed
  if (s.current_limit !== undefined || d.limit === undefined) return over ? { ...s, code: OVER_LIMIT, limit_remaining: 0 } : s
  return {
    code: over ? OVER_LIMIT : s.code,
    limit_remaining: over ? 0 : Math.max(0, Math.floor(d.limit.remaining)),
    duration_until_reset: { seconds: d.limit.resetS },
  }
}
