/**
 * The bundle's `llm_prices` (docs/llm.md "Budgets in money"; ours): what a model's tokens cost,
 * for cost_based budgets counted in money (`"cost_key": "llm_price"`). Every amount is held in
 * micros, millionths of the table's currency, as integers: a price per million tokens in micros
 * is what one token costs in millionths of a micro, so a request's cost is
 * ceil(Σ tokens × price / 1,000,000) micros, summed exactly in BigInt and rounded up once per
 * request (never below what the provider bills; at most one micro above it). Floats would drift:
 * 0.1 + 0.2 is not 0.3, and a day of small calls must add up to what the invoice says.
 *
 * A model's price is its exact entry, else the longest prefix entry (`gpt-4o*`) its name starts
 * with, else `default`; without `default`, a model the table does not list (or a request whose
 * model cannot be read) is priced at the highest input, cached input, cache write and output
 * prices of the table, so no unknown model is ever cheaper than a known one.
 */

/** One model's prices in micros per million tokens. */
export interface ModelPrice {
  input: number
  /** Input tokens read from the provider's prompt cache (default: input). */
  cachedInput: number
  /** Input tokens written to the prompt cache (Anthropic bills them apart; default: input). */
  cacheWrite: number
  output: number
}

/** Tokens of one call, by how they are billed. */
export interface BilledTokens {
  /** Input not read from nor written to a cache. */
  input: number
  cachedInput: number
  cacheWrite: number
  output: number
}

/** `llm_prices` as written in the bundle (after schema validation). */
export interface RawPrices {
  currency: string
  per_million_tokens: Record<string, { input: number; output: number; cached_input?: number; cache_write_input?: number }>
}

export interface PriceTable {
  currency: string
  /** The price of `model` (lower-cased, as llm:model reads it; undefined: the request names none). */
  priceOf(model: string | undefined): ModelPrice
}

/** Micros in one unit of the currency. */
export const MICROS = 1_000_000

/** The table key that prices every model the others do not. */
export const DEFAULT_PRICE = 'default'

/** An amount of the currency in micros; undefined when it has more than six decimals (a fraction of a micro). */
export function toMicros(amount: number): number | undefined {
  const m = Math.round(amount * MICROS)
  // The product of a decimal with ≤ 6 places lands within float noise (a few ulps) of an integer.
  return Math.abs(amount * MICROS - m) <= 1e-6 + Math.abs(m) * 1e-15 ? m : undefined
}

/** Micros written as the currency's units with six decimals, trailing zeros dropped: 1500000 → "1.5". */
export function formatMicros(micros: number): string {
  if (!Number.isFinite(micros)) return String(micros)
  const sign = micros < 0 ? '-' : ''
  const abs = Math.abs(Math.round(micros))
  const whole = Math.floor(abs / MICROS)
  const frac = String(abs % MICROS)
    .padStart(6, '0')
    .replace(/0+$/, '')
  return `${sign}${whole}${frac ? `.${frac}` : ''}`
}

const MILLION = 1_000_000n

/** Whole tokens (a fraction billed as a whole token); 0 for what is not a finite count. */
function tokens(n: number): bigint {
  return Number.isFinite(n) && n > 0 ? BigInt(Math.ceil(n)) : 0n
}

/** What `t` costs at `p`, in micros, rounded up once (exact: BigInt). */
export function costMicros(p: ModelPrice, t: BilledTokens): number {
  const sum =
    tokens(t.input) * BigInt(p.input) +
    tokens(t.cachedInput) * BigInt(p.cachedInput) +
    tokens(t.cacheWrite) * BigInt(p.cacheWrite) +
    tokens(t.output) * BigInt(p.output)
  return Number((sum + MILLION - 1n) / MILLION)
}

/** A model name that ends in `*` (and holds no other): the prefix it stands for; undefined for an exact name. */
export function prefixOf(name: string): string | undefined {
  return name.endsWith('*') ? name.slice(0, -1) : undefined
}

function priceOfRaw(raw: RawPrices['per_million_tokens'][string]): ModelPrice {
  const input = toMicros(raw.input) ?? 0
  return {
    input,
    cachedInput: raw.cached_input === undefined ? input : (toMicros(raw.cached_input) ?? 0),
    cacheWrite: raw.cache_write_input === undefined ? input : (toMicros(raw.cache_write_input) ?? 0),
    output: toMicros(raw.output) ?? 0,
  }
}

/** The price table of a validated `llm_prices`: exact names in a map, prefixes longest first. */
export function compilePrices(raw: RawPrices): PriceTable {
  const exact = new Map<string, ModelPrice>()
  const prefixes: [string, ModelPrice][] = []
  let fallback: ModelPrice | undefined
  const highest: ModelPrice = { input: 0, cachedInput: 0, cacheWrite: 0, output: 0 }
  for (const [name, r] of Object.entries(raw.per_million_tokens)) {
    const p = priceOfRaw(r)
    for (const k of ['input', 'cachedInput', 'cacheWrite', 'output'] as const) highest[k] = Math.max(highest[k], p[k])
    const key = name.toLowerCase()
    const prefix = prefixOf(key)
    if (key === DEFAULT_PRICE) fallback = p
    else if (prefix === undefined) exact.set(key, p)
    else prefixes.push([prefix, p])
  }
  prefixes.sort((a, b) => b[0].length - a[0].length)
  const other = fallback ?? highest
  return {
    currency: raw.currency,
    priceOf(model) {
      // No model read: any prefix entry that takes every name (`*`) still applies.
      const name = model ?? ''
      const e = exact.get(name)
      if (e !== undefined) return e
      for (const [prefix, p] of prefixes) if (name.startsWith(prefix)) return p
      return other
    },
  }
}
