/**
 * `fairvisor test` for token_bucket_llm rules and money budgets (`"cost_key": "llm_price"`): the
 * prompt estimate and the reservation of an allowed request (for a money budget: the model, and
 * the reservation's price), and, when the sample line gives the backend's `response` (JSON or SSE
 * text), the settlement the gateway would make from it — through the same LlmExchange and the
 * same store as the run.
 */
import type { Decision, SpendReservation } from '../engine/decision.js'
import { LlmExchange, type Settlement } from '../llm/exchange.js'
import { formatMicros } from '../llm/prices.js'
import type { SpendSettlement } from '../llm/spend-settle.js'
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
  /** A money budget: the model priced (null: none read), the currency, and the reservation's and settlement's prices in micros. */
  model?: string | null
  currency?: string
  reserved_micros?: number
  settled_micros?: number
}

function spendRow(r: SpendReservation): LlmReport {
  return {
    policy: r.policyId,
    rule: r.ruleName,
    prompt_estimate: r.prompt,
    reserved: r.prompt + r.completion,
    model: r.model ?? null,
    currency: r.currency,
    reserved_micros: r.reserved,
  }
}

function spendSettled(row: LlmReport, s: SpendSettlement): void {
  const t = s.tokens
  row.settled = t === undefined ? (s.by === 'refunded' ? 0 : row.reserved) : t.input + t.cachedInput + t.cacheWrite + t.output
  row.settled_by = s.by
  row.settled_micros = s.used
}

export function llmReport(d: Decision, response: SampleRequest['response'], store: Store, nowS: number): LlmReport[] | undefined {
  const reservations = d.llm ?? []
  const spend = d.spend ?? []
  if (reservations.length === 0 && spend.length === 0) return undefined
  const rows: LlmReport[] = reservations.map((r) => ({
    policy: r.policyId,
    rule: r.ruleName,
    prompt_estimate: r.prompt,
    reserved: r.reserved,
  }))
  const spendRows = spend.map(spendRow)
  if (response === undefined) return [...rows, ...spendRows]
  let settled: Settlement[] = []
  let spent: SpendSettlement[] = []
  const keep = (s: Settlement[]): void => void (settled = s)
  const exchange = new LlmExchange(
    reservations,
    {
      store,
      now: () => nowS,
      settled: keep,
      dropped: (_err, s) => keep(s),
      wouldTruncate: () => undefined,
      truncated: () => undefined,
      spendSettled: (s) => void (spent = s),
    },
    undefined,
    spend,
  )
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
  for (const [i, s] of spent.entries()) spendSettled(spendRows[i]!, s)
  return [...rows, ...spendRows]
}

/** One money budget's line: the model, the reservation's price and, with a response, the settlement's. */
function spendLine(r: LlmReport): string {
  const c = r.currency!
  const money = (m: number): string => `${formatMicros(m)} ${c}`
  const reserved = r.reserved_micros!
  const settled =
    r.settled_micros === undefined
      ? ''
      : `, settled ${money(r.settled_micros)} (${r.settled_by}, ${r.settled} tokens), ${reserved - r.settled_micros >= 0 ? `${money(reserved - r.settled_micros)} given back` : `${money(r.settled_micros - reserved)} charged on top`}`
  return `    spend ${r.policy}/${r.rule}: model ${r.model ?? '(none read)'}, prompt estimate ${r.prompt_estimate}, reserved ${money(reserved)} (${r.reserved} tokens)${settled}`
}

/** Table lines of the LLM report. */
export function llmLines(rows: readonly LlmReport[] | undefined): string[] {
  return (rows ?? []).map((r) =>
    r.currency !== undefined
      ? spendLine(r)
      : `    llm ${r.policy}/${r.rule}: prompt estimate ${r.prompt_estimate}, reserved ${r.reserved}${r.settled === undefined ? '' : `, settled ${r.settled} (${r.settled_by}${r.reported_prompt === undefined ? '' : `, reported prompt ${r.reported_prompt}`}), ${r.reserved - r.settled >= 0 ? `${r.reserved - r.settled} given back` : `${r.settled - r.reserved} charged on top`}`}`,
  )
}
