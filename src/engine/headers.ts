/**
 * docs/behaviour.md §7 response headers as flat [name, value, …] lists, ready for
 * res.writeHead. Every value is a valid RFC 9651 structured field.
 */
import { boundedMemo } from '../bounded-cache.js'
import type { HeaderValues } from '../algorithms/algorithm.js'

/** An RFC 9651 sf-string: printable ASCII only, `\` and `"` escaped. */
export function sfString(s: string): string {
  return `"${s.replace(/[^\x20-\x7e]/g, '?').replace(/[\\"]/g, (c) => `\\${c}`)}"`
}

/** Policy ids come from the bundle (few, fixed): escape each once, not once per response. */
const idMemo = boundedMemo<string, string>(10_000)
function sfPolicyId(id: string): string {
  let out = idMemo.get(id)
  if (out === undefined) {
    idMemo.set(id, (out = sfString(id)))
  }
  return out
}

/** The RateLimit-* values of one limit, with the policy that owns it. */
export interface LimitView extends HeaderValues {
  policyId: string
}

/** RFC 9651 integers have at most 15 digits; a bundle with a huge burst or a tiny rate must not break the header. */
const SF_INT_MAX = 999_999_999_999_999

export function sfInteger(n: number): string {
  return String(n >= SF_INT_MAX ? SF_INT_MAX : n > 0 ? Math.floor(n) : 0)
}

export function rateLimitHeaders(l: LimitView): string[] {
  const limit = sfInteger(l.limit)
  const remaining = sfInteger(l.remaining)
  const reset = sfInteger(l.resetS)
  const id = sfPolicyId(l.policyId)
  return [
    'RateLimit-Limit',
    limit,
    'RateLimit-Remaining',
    remaining,
    'RateLimit-Reset',
    reset,
    'RateLimit',
    `${id};r=${remaining};t=${reset}`,
    'RateLimit-Policy',
    `${id};q=${limit};w=${sfInteger(l.windowS)}`,
  ]
}
