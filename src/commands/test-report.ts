/**
 * What `fairvisor test` prints per request: the report record, its table
 * form, the response headers of a decision, and the store decorator that
 * records each check's outcome.
 */
import type { Decision, PlannedLimit } from '../engine/decision.js'
import { rateLimitHeaders } from '../engine/headers.js'
import type { MemoryStore } from '../store/memory/store.js'
import { llmLines, type LlmReport } from './test-llm.js'
import { statusLines, type StatusSettlement } from './test-response.js'
import type { Adjustment, ApplyDone, Check, Outcomes, Store, StoreState } from '../store/store.js'

/** The headers the gateway would send for this decision (docs/behaviour.md §7, reason exposed). */
export function responseHeaders(d: Decision): [string, string][] {
  const flat = d.limit ? rateLimitHeaders(d.limit) : []
  if (!d.allowed) {
    if (d.retryAfterS !== undefined) flat.push('Retry-After', String(d.retryAfterS))
    flat.push('X-Fairvisor-Reason', d.reason)
  } else if (d.warning !== undefined) flat.push('X-Fairvisor-Warning', d.warning)
  const out: [string, string][] = []
  for (let i = 0; i < flat.length; i += 2) out.push([flat[i]!, flat[i + 1]!])
  return out
}

/** Store decorator: the outcome of each check, in check order, for the report. */
export class RecordingStore implements Store {
  readonly kind = 'memory'
  last: Outcomes = []
  constructor(private readonly inner: MemoryStore) {}
  apply(checks: readonly Check[], now: number, done: ApplyDone): void {
    this.inner.apply(checks, now, (err, out) => {
      this.last = out ?? []
      done(err, out)
    })
  }
  adjust(adjustments: readonly Adjustment[], now: number, done: (err: Error | null) => void): void {
    this.inner.adjust(adjustments, now, done)
  }
  state(): StoreState {
    return this.inner.state()
  }
  ready(): Promise<boolean> {
    return this.inner.ready()
  }
  close() {
    return this.inner.close()
  }
}

export interface LimitReport extends Omit<PlannedLimit, 'policyId' | 'ruleName'> {
  policy: string
  rule: string
  /** allowed / rejected / not_evaluated (an earlier limit of its group rejected). */
  outcome: 'allowed' | 'rejected' | 'not_evaluated'
  /** Committed: it passed and no limit of its group (enforce or shadow) rejected (no half-spend). */
  charged: boolean
  /** Tokens left after the check (as if committed when `charged` is false). */
  tokens_left?: number
  /** What the limit's figure means: budget usage and stage, identical-request count, spend rate. */
  detail?: string
}

export interface RequestReport {
  n: number
  line: number
  at: number
  method: string
  path: string
  host: string
  ip: string
  /** The bearer token: verified, rejected (and why), or claims not verified (no key source); absent without one. */
  jwt?: string
  matched_policies: readonly string[]
  limits: LimitReport[]
  skipped: { policy: string; rule: string; missing_key: string }[]
  shadow_rejects: { policy: string; rule: string; key: string }[]
  /** Value of each limit key the evaluated rules read (descriptor → value). */
  descriptors: Record<string, string>
  decision: 'allow' | 'reject' | 'error'
  status: number
  reason: string
  policy?: string
  rule?: string
  headers: Record<string, string>
  /** A throttled request, or one in debt, would be held this long before it is forwarded. */
  delay_ms?: number
  /** The hold is a debt (max_delay_ms): a token bucket's tokens, a sliding window's count, charged ahead of time. */
  debt?: boolean
  /** Rejected because FAIRVISOR_MAX_DELAYED requests were held already; its charges were given back. */
  hold_refused?: boolean
  /** token_bucket_llm rules: estimate, reservation, settlement. */
  llm?: LlmReport[]
  /** The sample's response status and what it settled (rules with count_statuses / refund_statuses). */
  response_status?: number
  status_settlement?: StatusSettlement[]
}

export function table(r: RequestReport): string {
  const head = `#${r.n} line ${r.line} t+${r.at.toFixed(3)}s ${r.method} ${r.path} host=${r.host} ip=${r.ip}`
  const lines = [head]
  if (r.jwt !== undefined) lines.push(`    jwt: ${r.jwt}`)
  lines.push(`    policies: ${r.matched_policies.length ? r.matched_policies.join(', ') : '(none)'}`)
  const ds = Object.entries(r.descriptors)
  if (ds.length) lines.push(`    descriptors: ${ds.map(([k, v]) => `${k}=${v}`).join(' ')}`)
  for (const l of r.limits) {
    const left =
      l.outcome === 'allowed' && !l.charged
        ? r.hold_refused
          ? ', given back (no hold free)'
          : ', not charged (another limit rejected)'
        : l.tokens_left === undefined || l.tokens_left < 0 // below zero: the detail tells the debt
          ? ''
          : `, ${Math.floor(l.tokens_left)} left`
    lines.push(
      `    limit ${l.policy}/${l.rule}${l.shadow ? ' [shadow]' : ''} key=${l.key} cost=${l.cost} → ${l.outcome}${left}${l.detail ? `; ${l.detail}` : ''}`,
    )
  }
  for (const s of r.skipped) lines.push(`    skipped ${s.policy}/${s.rule}: ${s.missing_key} is missing`)
  for (const s of r.shadow_rejects) lines.push(`    shadow ${s.policy}/${s.rule} would reject key=${s.key}`)
  lines.push(
    `    → ${r.decision.toUpperCase()} ${r.status} ${r.reason}${r.rule ? ` (${r.policy}/${r.rule})` : ''}${r.delay_ms ? `, held ${r.delay_ms} ms${r.debt ? ' for its turn' : ''}` : ''}${r.hold_refused ? ', refused: FAIRVISOR_MAX_DELAYED requests are held already' : ''}`,
  )
  lines.push(...llmLines(r.llm))
  if (r.response_status !== undefined) lines.push(...statusLines(r.response_status, r.status_settlement))
  const h = Object.entries(r.headers)
  if (h.length) lines.push(`    headers: ${h.map(([k, v]) => `${k}: ${v}`).join(' | ')}`)
  return lines.join('\n')
}
