/**
 * A rule's response-status option (reverse proxy mode; ours, not Edge's):
 * `count_statuses` charges only responses with one of its statuses,
 * `refund_statuses` gives the charge back on one of its statuses. Patterns
 * are exact codes (`"401"`) or a class (`"5xx"`), validated by the schema
 * (`#/$defs/statusPatterns`); compiled once into a table of the 500 statuses
 * from 100 to 599, so matching a response is one array read.
 */
import type { RawRule } from './types.js'

export interface StatusRule {
  /** `count`: charge only responses whose status matches; `refund`: give the charge back when it matches. */
  kind: 'count' | 'refund'
  matches(status: number): boolean
}

/** The patterns as a table indexed by status − 100. */
function table(patterns: readonly string[]): Uint8Array {
  const t = new Uint8Array(500)
  for (const p of patterns) {
    const first = Number(p[0])
    if (/^[1-5][xX]{2}$/.test(p)) t.fill(1, (first - 1) * 100, first * 100)
    else if (/^[1-5]\d\d$/.test(p)) t[Number(p) - 100] = 1
  }
  return t
}

/** The rule's status option, undefined when it has none (a rule may not set both: validate refuses it). */
export function statusRuleOf(raw: RawRule): StatusRule | undefined {
  const patterns = raw.count_statuses ?? raw.refund_statuses
  if (patterns === undefined) return undefined
  const t = table(patterns)
  return {
    kind: raw.count_statuses !== undefined ? 'count' : 'refund',
    matches: (status) => status >= 100 && status < 600 && t[status - 100] === 1,
  }
}
