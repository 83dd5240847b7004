/**
 * SPEC §7 response headers as flat [name, value, …] lists, ready for
 * res.writeHead. Every value is a valid RFC 9651 structured field.
 */

/** An RFC 9651 sf-string: printable ASCII only, `\` and `"` escaped. */
export function sfString(s: string): string {
  return `"${s.replace(/[^\x20-\x7e]/g, '?').replace(/[\\"]/g, (c) => `\\${c}`)}"`
}

export interface LimitView {
  policyId: string
  burst: number
  remaining: number
  resetS: number
  windowS: number
}

export function rateLimitHeaders(l: LimitView): string[] {
  const limit = Math.floor(l.burst)
  const id = sfString(l.policyId)
  return [
    'RateLimit-Limit', String(limit),
    'RateLimit-Remaining', String(l.remaining),
    'RateLimit-Reset', String(l.resetS),
    'RateLimit', `${id};r=${l.remaining};t=${l.resetS}`,
    'RateLimit-Policy', `${id};q=${limit};w=${l.windowS}`,
  ]
}
