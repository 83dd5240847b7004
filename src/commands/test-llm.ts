/**
 * `fairvisor test` for token_bucket_llm rules: the prompt estimate and the
 * reservation of an allowed request, and, when the sample line gives the
 * backend's `response` (JSON or SSE text), the settlement the gateway would
 * make from it — through the same LlmExchange and the same store as the run.
 */
import type { Decision } from '../engine/decision.js'
import { LlmExchange, type Settlement } from '../llm/exchange.js'
import type { Store } from '../store/store.js'
import type { SampleRequest } from './test-samples.js'

export interface LlmReport {
  policy: string
  rule: string
  prompt_estimate: number
  reserved: number
  /** Tokens settled (what the counters end at for this call), when a response was given. */
  settled?: number
  /** usage: reported by the response; counted: streamed tokens; reserved: kept; refunded: error answer. */
  settled_by?: Settlement['by']
  reported_prompt?: number
}

export function llmReport(d: Decision, response: SampleRequest['response'], store: Store, nowS: number): LlmReport[] | undefined {
  const reservations = d.llm
  if (reservations === undefined || reservations.length === 0) return undefined
  const rows: LlmReport[] = reservations.map((r) => ({
    policy: r.policyId,
    rule: r.ruleName,
    prompt_estimate: r.prompt,
    reserved: r.reserved,
  }))
  if (response === undefined) return rows
  let settled: Settlement[] = []
  const keep = (s: Settlement[]): void => void (settled = s)
  const exchange = new LlmExchange(reservations, {
    store,
    now: () => nowS,
    settled: keep,
    dropped: (_err, s) => keep(s),
    wouldTruncate: () => undefined,
    truncated: () => undefined,
  })
  exchange.headers(200, response.contentType, undefined)
  exchange.data(response.body)
  if (exchange.ending !== undefined) exchange.closing()
  else exchange.end(true)
  for (const [i, s] of settled.entries()) {
    Object.assign(rows[i]!, {
      settled: s.used,
      settled_by: s.by,
      ...(s.actualPrompt === undefined ? {} : { reported_prompt: s.actualPrompt }),
    })
  }
  return rows
}

/** Table lines of the LLM report. */
export function llmLines(rows: readonly LlmReport[] | undefined): string[] {
  return (rows ?? []).map(
    (r) =>
      `    llm ${r.policy}/${r.rule}: prompt estimate ${r.prompt_estimate}, reserved ${r.reserved}${r.settled === undefined ? '' : `, settled ${r.settled} (${r.settled_by}${r.reported_prompt === undefined ? '' : `, reported prompt ${r.reported_prompt}`}), ${r.reserved - r.settled >= 0 ? `${r.reserved - r.settled} given back` : `${r.settled - r.reserved} charged on top`}`}`,
  )
}
