/**
 * The X-Fairvisor-Debug-* headers of one decision, for a client holding a
 * debug session (docs/behaviour.md §8). Pure: the decision → response
 * function appends them on every transport.
 */
import type { Decision } from '../engine/decision.js'
import { isSecretDescriptor, shortHash } from '../engine/log-key.js'

const MAX_DESCRIPTORS = 16
const MAX_DESCRIPTOR_VALUE = 256

/** Header values must be visible ASCII; request-derived text is made safe, never rejected. */
function safe(v: string): string {
  return v.replace(/[^\x20-\x7e]/g, '?')
}

/**
 * The debug headers for one decision (flat name/value list). The reason is
 * included unless the caller already sends X-Fairvisor-Reason itself.
 */
export function debugHeaders(d: Decision, latencyUs: number, withReason: boolean): string[] {
  const decision = d.allowed ? 'allow' : 'reject'
  const latency = String(latencyUs)
  const out = [
    'X-Fairvisor-Decision',
    decision,
    'X-Fairvisor-Mode',
    d.mode,
    'X-Fairvisor-Latency-Us',
    latency,
    'X-Fairvisor-Debug-Decision',
    decision,
    'X-Fairvisor-Debug-Mode',
    d.mode,
    'X-Fairvisor-Debug-Reason',
    d.reason,
    'X-Fairvisor-Debug-Latency-Us',
    latency,
    'X-Fairvisor-Debug-Matched-Policies',
    safe(d.matchedPolicies.join(',')),
  ]
  if (withReason) out.push('X-Fairvisor-Reason', d.reason)
  if (d.policyId !== undefined) out.push('X-Fairvisor-Debug-Policy', safe(d.policyId))
  if (d.ruleName !== undefined) out.push('X-Fairvisor-Debug-Rule', safe(d.ruleName))
  // A token that failed verification has no claims: its `jwt:` rules were skipped for that reason.
  if (d.jwtRejected !== undefined) out.push('X-Fairvisor-Debug-Jwt-Rejected', d.jwtRejected)
  if (d.descriptors && d.descriptors.size > 0) {
    const keys = [...d.descriptors.keys()].sort().slice(0, MAX_DESCRIPTORS)
    for (let i = 0; i < keys.length; i++) {
      const k = keys[i]!
      out.push(`X-Fairvisor-Debug-Descriptor-${i + 1}-Key`, safe(k))
      out.push(
        `X-Fairvisor-Debug-Descriptor-${i + 1}-Value`,
        safe(isSecretDescriptor(k) ? shortHash(d.descriptors.get(k)!) : d.descriptors.get(k)!.slice(0, MAX_DESCRIPTOR_VALUE)),
      )
    }
  }
  return out
}
