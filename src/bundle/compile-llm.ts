/**
 * The LLM parts of a compiled rule (compile.ts): a token_bucket_llm rule's config and day-counter
 * prefixes, a money budget's reservation settings with the bundle's price table, and whether a
 * policy's requests must have their body read before the decision (an LLM rule, a money budget,
 * or `llm:model` read from the body as a limit key or a match).
 */
import type { Limit, RuleAlgorithm } from '../algorithms/algorithm.js'
import type { MoneyConfig } from '../algorithms/llm-price.js'
import { LLM_DAY, type LlmConfig } from '../algorithms/llm.js'
import { tokenCounter } from '../llm/estimate.js'
import { orClientAddress } from '../llm/keyless.js'
import type { PriceTable } from '../llm/prices.js'
import type { Extractor } from '../request/descriptors.js'

/** token_bucket_llm: the config (also the rule's limit, the minute bucket) and the day counter's prefixes. */
export interface LlmRule {
  config: LlmConfig
  dayPrefix: string
  shadowDayPrefix: string
}

/** A cost_based budget counted in money: how its reservation is made, and the prices it is made at. */
export interface SpendRule {
  money: MoneyConfig
  prices: PriceTable
}

/** The LLM parts of the rule `name` of `algorithm` whose normalised limit is `limit`; `supported` false: a money budget without prices. */
export function llmParts(
  algorithm: RuleAlgorithm,
  limit: Limit,
  name: string,
  prices: PriceTable | undefined,
): { llm?: LlmRule; spend?: SpendRule; supported: boolean } {
  if (algorithm.llm === true) {
    const config = limit as LlmConfig
    if (config.estimator === 'tokenizer') tokenCounter(config.encoding) // loaded now, not on the first request
    return {
      llm: { config, dayPrefix: `${LLM_DAY.keyPrefix}${name}:`, shadowDayPrefix: `shadow:${LLM_DAY.keyPrefix}${name}:` },
      supported: true,
    }
  }
  const money = (limit as { money?: MoneyConfig }).money
  if (money === undefined) return { supported: true }
  if (prices === undefined) return { supported: false } // never in a validated bundle: validate-prices.ts
  if (money.estimator === 'tokenizer') tokenCounter(money.encoding)
  return { spend: { money, prices }, supported: true }
}

/** The descriptor read from the body (or the path) of an LLM call. */
export const MODEL_KEY = 'llm:model'

/** A match value as compared: `llm:model` values are lower-case, so is what a match expects of them. */
export function expectedValue(key: string, v: string | number | boolean): string {
  return key === MODEL_KEY ? String(v).toLowerCase() : String(v)
}

/** Whether a compiled rule needs the request body before the decision. */
export function readsBody(r: {
  llm?: LlmRule
  spend?: SpendRule
  keyNames: readonly string[]
  match: readonly { key: string }[]
}): boolean {
  return r.llm !== undefined || r.spend !== undefined || r.keyNames.includes(MODEL_KEY) || r.match.some((m) => m.key === MODEL_KEY)
}

/**
 * A rule's limit-key extractors and matches: `llm:api_key` of an LLM rule or a money budget (`llm`)
 * falls back on the client address (llm/keyless.ts); `llm:model` matches compare lower-cased.
 */
export function keysAndMatch(
  keyNames: readonly string[],
  match: Readonly<Record<string, string | number | boolean>> | undefined,
  llm: boolean,
  extractorOf: (key: string) => Extractor,
): { keys: Extractor[]; match: { key: string; extract: Extractor; expected: string }[] } {
  return {
    keys: keyNames.map((k) => (llm && k === 'llm:api_key' ? orClientAddress(extractorOf(k)) : extractorOf(k))),
    match: Object.entries(match ?? {}).map(([key, expected]) => ({
      key,
      extract: extractorOf(key),
      expected: expectedValue(key, expected),
    })),
  }
}
