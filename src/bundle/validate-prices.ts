/**
 * The checks of `llm_prices` (llm/prices.ts; ours) that JSON Schema cannot express, and of the
 * rules that count money from it: amounts in whole micros (six decimals at most), model names
 * with `*` only at their end, no two names that differ only in case (names are compared without
 * it), a budget counted in money only where the bundle has prices, and a warning when the table
 * has no `default` (models it does not list are then priced at its highest prices).
 */
import { LLM_PRICE } from '../algorithms/llm-price.js'
import { DEFAULT_PRICE, toMicros } from '../llm/prices.js'
import type { BundleIssue, RawBundle, RawRule } from './types.js'

const PRICE_FIELDS = ['input', 'cached_input', 'cache_write_input', 'output'] as const

/** A JSON pointer token (RFC 6901). */
const token = (s: string): string => s.replace(/~/g, '~0').replace(/\//g, '~1')

function checkTable(doc: RawBundle, out: BundleIssue[]): void {
  const base = '/llm_prices/per_million_tokens'
  const seen = new Map<string, string>()
  let fallback = false
  for (const [name, price] of Object.entries(doc.llm_prices!.per_million_tokens)) {
    const at = `${base}/${token(name)}`
    const star = name.indexOf('*')
    if (star !== -1 && star !== name.length - 1)
      out.push({ pointer: at, message: `model "${name}" holds a * before its end: only a trailing * (a prefix, "gpt-4o*") is supported` })
    const lower = name.toLowerCase()
    const other = seen.get(lower)
    if (other !== undefined)
      out.push({
        pointer: at,
        message: `model "${name}" is also written "${other}": names are compared without case, so one price must go`,
      })
    else seen.set(lower, name)
    if (lower === DEFAULT_PRICE || lower === '*') fallback = true
    for (const f of PRICE_FIELDS) {
      const v = price[f]
      if (typeof v === 'number' && toMicros(v) === undefined)
        out.push({
          pointer: `${at}/${f}`,
          message: `${f} (${v}) has more than six decimals: money is counted in millionths of the currency`,
        })
    }
  }
  if (!fallback)
    out.push({
      pointer: base,
      message: `per_million_tokens has no "${DEFAULT_PRICE}" price: a model it does not list, or a request whose model cannot be read, is priced at the highest input, cached input and output prices it lists`,
      warning: true,
    })
}

function rulesOf(doc: RawBundle): [string, RawRule][] {
  if (!Array.isArray(doc.policies)) return []
  return doc.policies.flatMap((p, i): [string, RawRule][] => {
    const spec = p?.spec
    if (spec === null || typeof spec !== 'object') return []
    const rules: [string, RawRule][] = (Array.isArray(spec.rules) ? spec.rules : []).map((r, j) => [`/policies/${i}/spec/rules/${j}`, r])
    if (spec.fallback_limit) rules.push([`/policies/${i}/spec/fallback_limit`, spec.fallback_limit])
    return rules
  })
}

/** Issues of the price table and of the money rules; `clean(pointer)`: the schema found nothing wrong there. */
export function checkPrices(doc: RawBundle, clean: (pointer: string) => boolean, out: BundleIssue[]): void {
  if (doc.llm_prices !== undefined && clean('/llm_prices')) checkTable(doc, out)
  if (doc.llm_prices !== undefined) return
  for (const [at, r] of rulesOf(doc)) {
    if (r?.algorithm_config?.cost_key === LLM_PRICE && clean(at))
      out.push({
        pointer: `${at}/algorithm_config/cost_key`,
        message: `"cost_key": "${LLM_PRICE}" needs the bundle's llm_prices, the table of what each model costs`,
      })
  }
}
