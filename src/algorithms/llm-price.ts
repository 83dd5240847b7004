/**
 * A cost_based budget counted in money (`"cost_key": "llm_price"`; docs/llm.md "Budgets in
 * money"; ours): the cost of a request is the price of its LLM call in the bundle's
 * `llm_prices`, in micros (millionths of the currency, llm/prices.ts). Before the call the
 * reservation is charged — the prompt estimate (token_source, as token_bucket_llm estimates it) at
 * the model's input price plus the completion the body asks for (else default_max_completion) at
 * its output price — and after it the charge is settled on the usage the upstream reports
 * (llm/spend-settle.ts). `max_cost_per_request` refuses a request whose reservation alone costs
 * more (`cost_per_request_exceeded`, no store call); so does a reservation above the whole
 * budget, which could never pass. This file owns the config's fields and checks; the budget
 * itself is cost-budget.ts, the planning engine/spend-plan.ts.
 */
import { ENCODINGS, ESTIMATORS, type Estimator } from '../llm/estimate.js'
import { MICROS, toMicros } from '../llm/prices.js'
import type { ConfigIssue } from './algorithm.js'

declare module './algorithm.js' {
  interface RejectReasons {
    cost_per_request_exceeded: true
  }
}

/** The cost_key of a budget counted in money. */
export const LLM_PRICE = 'llm_price'

/** What a money budget needs beyond the budget: how a reservation is made, and the per-request cap. */
export interface MoneyConfig {
  estimator: Estimator
  encoding: string
  defaultMaxCompletion: number
  /** The most one request's reservation may cost (micros); the budget when it is lower. */
  maxCostMicros: number
}

/** The largest amount a money budget holds: micros stay exact integers in a double (2^53). */
const MAX_AMOUNT = Math.floor(Number.MAX_SAFE_INTEGER / MICROS)

/** The cost_based config fields of a money budget (merged into its configSchema). */
export const MONEY_FIELDS = {
  max_cost_per_request: {
    $ref: '#/$defs/positive',
    description: 'cost_key llm_price: the most one request’s reservation may cost, in the currency of llm_prices.',
  },
  default_max_completion: {
    $ref: '#/$defs/positiveInteger',
    description: 'cost_key llm_price: the output tokens reserved when the body sets no max_tokens (default 1000).',
  },
  token_source: {
    type: 'object',
    properties: { estimator: { enum: [...ESTIMATORS] }, encoding: { enum: [...ENCODINGS] } },
  },
} as const

const MONEY_ONLY = Object.keys(MONEY_FIELDS)
const COUNT_ONLY = ['fixed_cost', 'default_cost', 'min_cost']

function amountIssue(c: Record<string, unknown>, field: string, out: ConfigIssue[]): void {
  const v = c[field]
  if (typeof v !== 'number') return
  if (toMicros(v) === undefined)
    out.push({ field, message: `${field} (${v}) has more than six decimals: money is counted in millionths of the currency` })
  else if (v > MAX_AMOUNT) out.push({ field, message: `${field} (${v}) must be at most ${MAX_AMOUNT}` })
}

/** The checks of a cost_based config about money: its fields only with llm_price, amounts in whole micros. */
export function checkMoney(c: Record<string, unknown>, out: ConfigIssue[]): void {
  if (c.cost_key !== LLM_PRICE) {
    for (const f of MONEY_ONLY)
      if (c[f] !== undefined) out.push({ field: f, message: `${f} applies to a budget counted in money only ("cost_key": "llm_price")` })
    return
  }
  for (const f of COUNT_ONLY)
    if (c[f] !== undefined)
      out.push({ field: f, message: `${f} does not apply to "cost_key": "llm_price": a request costs the price of its call` })
  amountIssue(c, 'budget', out)
  amountIssue(c, 'max_cost_per_request', out)
}

/** The money part of a validated config (undefined: a budget counted in units), and the budget in micros. */
export function normaliseMoney(c: Record<string, unknown>): { money: MoneyConfig; budgetMicros: number } | undefined {
  if (c.cost_key !== LLM_PRICE) return undefined
  const budgetMicros = toMicros(Number(c.budget)) ?? Math.round(Number(c.budget) * MICROS)
  const cap = typeof c.max_cost_per_request === 'number' ? (toMicros(c.max_cost_per_request) ?? budgetMicros) : budgetMicros
  const ts = (c.token_source ?? {}) as { estimator?: Estimator; encoding?: string }
  return {
    budgetMicros,
    money: {
      estimator: ts.estimator ?? 'simple_word',
      encoding: ts.encoding ?? 'o200k_base',
      defaultMaxCompletion: typeof c.default_max_completion === 'number' ? c.default_max_completion : 1000,
      maxCostMicros: Math.min(cap, budgetMicros),
    },
  }
}
