/**
 * cost_based (docs/behaviour.md §5): a spend budget per UTC-aligned period (5m, 1h,
 * 1d, 7d from Sunday 00:00 UTC, or 1M: a calendar month from the 1st 00:00 UTC), on
 * the window-counter kind. The store adds the request's cost atomically and rejects
 * (rolling the increment back) when the usage would pass the budget; otherwise the
 * highest warn/throttle stage whose threshold_percent the usage has reached applies.
 */
import { EPSILON, type Advice, type HeaderValues, type RuleAlgorithm } from './algorithm.js'
import { counterLimit, SUNDAY_ORIGIN_S, type CounterLimit } from './kinds/window-counter/kind.js'
import { checkMoney, LLM_PRICE, MONEY_FIELDS, normaliseMoney, type MoneyConfig } from './llm-price.js'

declare module './algorithm.js' {
  interface RejectReasons {
    budget_exceeded: true
  }
}

/** Period lengths; 1M is the window counter's calendar month (window −1). */
const PERIOD_S: Readonly<Record<string, number>> = { '5m': 300, '1h': 3600, '1d': 86_400, '7d': 604_800, '1M': -1 }

/** The RateLimit-Policy `w` of a calendar month, which has no one length: 30 days. */
const MONTH_W_S = 2_592_000

/** Retry-After jitter of a reject is at most this (s): the period ends at a fixed instant, and a month's wait should not grow by half. */
const JITTER_MAX_S = 60

/** A throttle delay is capped here whatever the bundle says. */
export const MAX_DELAY_MS = 30_000

export interface Stage {
  thresholdPercent: number
  action: 'warn' | 'throttle' | 'reject'
  delayMs: number
}

export interface BudgetConfig extends CounterLimit {
  budget: number
  /** Period length in seconds for RateLimit-Policy (a calendar month: 30 days). */
  periodS: number
  /** warn/throttle stages, highest threshold first. */
  stages: readonly Stage[]
  /** A budget counted in money (`"cost_key": "llm_price"`, llm-price.ts): budget and usage are in micros of the currency. */
  money?: MoneyConfig
}

/** The stage that applies at `usage` (this request included), if any. */
function stageAt(c: BudgetConfig, usage: number): Stage | undefined {
  const percent = (usage / c.budget) * 100
  for (const s of c.stages) if (percent + EPSILON >= s.thresholdPercent) return s
  return undefined
}

export const COST_BUDGET: RuleAlgorithm<BudgetConfig> = {
  name: 'cost_based',
  keyPrefix: 'cb:',
  rejectReason: 'budget_exceeded',
  retryJitterMaxS: JITTER_MAX_S,
  configSchema: {
    type: 'object',
    required: ['budget', 'period', 'staged_actions'],
    properties: {
      budget: { $ref: '#/$defs/positive' },
      period: { enum: Object.keys(PERIOD_S) },
      cost_key: {
        description: 'fixed, header:<name>, query:<name>, or llm_price: the price of the LLM call in the bundle’s llm_prices (ours).',
        type: 'string',
        pattern: `^(fixed|${LLM_PRICE}|header:[A-Za-z0-9_-]+|query:[A-Za-z0-9_-]+)$`,
      },
      ...MONEY_FIELDS,
      fixed_cost: { $ref: '#/$defs/positive' },
      min_cost: { $ref: '#/$defs/positive', description: 'Smallest cost a header or query parameter can set (default 1).' },
      default_cost: { $ref: '#/$defs/positive' },
      staged_actions: {
        type: 'array',
        minItems: 1,
        items: {
          type: 'object',
          required: ['threshold_percent', 'action'],
          properties: {
            threshold_percent: { type: 'number', minimum: 0, maximum: 100 },
            action: { enum: ['warn', 'throttle', 'reject'] },
            delay_ms: { $ref: '#/$defs/positive' },
          },
          if: { properties: { action: { const: 'throttle' } } },
          then: { required: ['delay_ms'] },
        },
      },
    },
  },
  costField: 'cost_key',
  check(c, out) {
    // Stages are sorted by threshold at load, so file order does not matter; thresholds must differ.
    const stages = c.staged_actions as { threshold_percent: number; action: string }[]
    const seen = new Map<number, number>()
    stages.forEach((s, i) => {
      const first = seen.get(s.threshold_percent)
      if (first !== undefined)
        out.push({
          field: `staged_actions/${i}/threshold_percent`,
          message: `staged_actions thresholds must be distinct (${s.threshold_percent} is also stage ${first})`,
        })
      else seen.set(s.threshold_percent, i)
    })
    const rejects = stages.filter((s) => s.action === 'reject')
    if (rejects.length !== 1 || rejects[0]!.threshold_percent !== 100)
      out.push({ field: 'staged_actions', message: 'staged_actions must contain exactly one reject action, at threshold_percent 100' })
    checkMoney(c, out)
  },
  capacity: (l) => l.budget,
  normalise(c) {
    const m = normaliseMoney(c)
    const budget = m?.budgetMicros ?? Number(c.budget)
    const windowS = PERIOD_S[String(c.period)] ?? 3600
    const raw = (c.staged_actions ?? []) as { threshold_percent: number; action: Stage['action']; delay_ms?: number }[]
    const stages = raw
      .filter((s) => s.action !== 'reject')
      .map((s) => ({ thresholdPercent: s.threshold_percent, action: s.action, delayMs: Math.min(MAX_DELAY_MS, s.delay_ms ?? 0) }))
      .sort((a, b) => b.thresholdPercent - a.thresholdPercent)
    const origin = windowS === 604_800 ? SUNDAY_ORIGIN_S : 0
    const limit: BudgetConfig = { ...counterLimit(budget, windowS, origin), budget, periodS: windowS < 0 ? MONTH_W_S : windowS, stages }
    if (m !== undefined) limit.money = m.money
    return limit
  },
  headers(c, usage, secondsToEnd, rejected): HeaderValues {
    return {
      limit: c.budget,
      remaining: rejected ? 0 : Math.max(0, Math.floor(c.budget - usage + EPSILON)),
      resetS: secondsToEnd,
      windowS: c.periodS,
    }
  },
  advise(c, usage): Advice | undefined {
    const s = stageAt(c, usage)
    if (s === undefined) return undefined
    return s.action === 'throttle' ? { warning: 'budget_throttle', delayMs: s.delayMs } : { warning: 'budget_warn', delayMs: 0 }
  },
  describe(c, usage) {
    const s = stageAt(c, usage)
    return `usage ${+usage.toFixed(6)}/${c.budget}${c.money ? ' micros' : ''} (${+((usage / c.budget) * 100).toFixed(2)} %)${s ? `, stage ${s.action} at ${s.thresholdPercent} %` : ''}`
  },
}
