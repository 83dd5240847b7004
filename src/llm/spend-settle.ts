/**
 * Settling a money budget's reservation (engine/spend-plan.ts) once the response says what the
 * call used, on the same figures and in the same order as the token settlement (exchange.ts):
 * the reported usage when it is the call's final figure (llm/settlement.ts); else what a stream carried (the prompt
 * reported or estimated, the completion counted or reported, whichever is larger); else nothing
 * for an error answer or none at all (the provider bills neither); else the reservation (a JSON
 * answer without usage). The tokens are priced by kind — input, cached input (OpenAI's
 * `cached_tokens` inside the prompt, Anthropic's `cache_read_input_tokens` beside it), cache
 * writes (Anthropic's `cache_creation_input_tokens`) and output — in micros, and the budget's
 * counter moves by reserved − used in the exchange's one store adjust. An overrun is charged at
 * most the whole budget, so a reply claiming `prompt_tokens: 1e15` spends the period and no more.
 */
import type { SpendReservation } from '../engine/decision.js'
import type { Adjustment } from '../store/store.js'
import type { SettledBy } from './settlement.js'
import { costMicros, type BilledTokens } from './prices.js'
import type { Usage } from './usage.js'

/** What the exchange measured of the call. */
export interface Measured {
  usage: Usage
  /** Completion tokens counted from a stream (undefined: not a stream). */
  counted: number | undefined
  /** The answer ended by itself (not cut, the client did not leave). */
  complete: boolean
  /** The gateway cut the stream. */
  cut: boolean
  /** The upstream's status (0: no answer). */
  status: number
  /**
   * The usage is the call's final figure (exchange.ts: also a stream whose final usage event came
   * before the client left); when absent, only an answer that ended by itself and was not cut.
   */
  usageFinal?: boolean
}

export interface SpendSettlement {
  reservation: SpendReservation
  /** Micros the call cost as settled. */
  used: number
  /** The tokens priced (undefined: settled on the reservation or given back). */
  tokens: BilledTokens | undefined
  by: SettledBy
  /** The overrun charged was cut down to the budget. */
  capped: boolean
}

/** The prompt's tokens by price: what the usage says was read from or written to a cache, the rest as input. */
function billed(prompt: number, u: Usage, output: number): BilledTokens {
  const cachedInput = (u.cacheRead ?? 0) + (u.cached ?? 0)
  const cacheWrite = u.cacheCreation ?? 0
  return { input: Math.max(0, prompt - cachedInput - cacheWrite), cachedInput, cacheWrite, output }
}

/** The settlement of `r` on what was measured (pure). */
export function spendOf(r: SpendReservation, m: Measured): Omit<SpendSettlement, 'capped'> {
  const u = m.usage
  const final = m.usageFinal ?? (!m.cut && (m.counted === undefined || m.complete))
  if (u.prompt !== undefined && u.completion !== undefined && final) {
    const tokens = billed(u.prompt, u, u.completion)
    return { reservation: r, used: costMicros(r.price, tokens), tokens, by: 'usage' }
  }
  if (m.counted !== undefined) {
    const output = Math.max(m.counted, u.completion ?? 0)
    const tokens = u.prompt === undefined ? billed(r.prompt, {} as Usage, output) : billed(u.prompt, u, output)
    return { reservation: r, used: costMicros(r.price, tokens), tokens, by: 'counted' }
  }
  if (m.status >= 400 || m.status === 0) return { reservation: r, used: 0, tokens: undefined, by: 'refunded' }
  return { reservation: r, used: r.reserved, tokens: undefined, by: 'reserved' }
}

/** Settles every money reservation: adds its adjustment (if any) to `into`; the settlements. */
export function settleSpends(list: readonly SpendReservation[], m: Measured, into: Adjustment[]): SpendSettlement[] {
  const out: SpendSettlement[] = []
  for (const r of list) {
    const s = spendOf(r, m)
    // A count that is no number would poison the counter: the reservation stands (an infinite one is capped below).
    const refund = Number.isNaN(s.used) ? 0 : r.reserved - s.used
    const overrun = Math.max(0, -refund)
    const capped = overrun > r.budget
    if (refund !== 0) into.push({ key: r.key, limit: r.limit, amount: refund > 0 ? refund : -Math.min(overrun, r.budget) })
    out.push({ ...s, used: capped ? r.reserved + r.budget : s.used, capped })
  }
  return out
}
