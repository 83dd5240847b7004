/**
 * A ShouldRateLimit call's descriptors planned against its domain's compiled
 * configuration: each descriptor's limit found as envoyproxy/ratelimit finds
 * it (grpc/rls-match.ts), `replaces` applied, and every counted descriptor
 * one limit for the engine, with its own cost (hits_addend) and counter key.
 */
import { unlimitedStatus, type DescriptorStatus } from '../decision/rls-answer.js'
import type { NamedLimit } from '../engine/evaluate.js'
import { overrideRule, type LimitOverride, type RlsDomain, type RlsRule } from './rls-compile.js'
import { UNIT_CODE } from './rls-config.js'
import { matchLimit, type Entry } from './rls-match.js'

/** A descriptor's limit for the engine, with where its status goes and what it says. */
export interface PlannedDescriptor extends NamedLimit {
  index: number
  answer: RlsRule
}

/**
 * `key_value` of each entry joined by `_`: with the rule's `rls:<domain>_` prefix, the counter key.
 * An entry matched by a `share_threshold` wildcard puts the pattern in place of its value, so all
 * the values it matches share one counter (as envoyproxy/ratelimit builds its cache key).
 */
function composite(entries: readonly Entry[], share: ReadonlyArray<string | undefined> | undefined): string {
  if (entries.length === 0) return '' // only a limit override is counted on no entries
  let out = `${entries[0]!.key}_${share?.[0] ?? entries[0]!.value}`
  if (share === undefined) for (let i = 1; i < entries.length; i++) out += `_${entries[i]!.key}_${entries[i]!.value}`
  else for (let i = 1; i < entries.length; i++) out += `_${entries[i]!.key}_${share[i] ?? entries[i]!.value}`
  return out
}

/** Reused across descriptors (calls are synchronous here): no array per descriptor on the common path. */
const scratch: Array<string | undefined> = []

/**
 * The rule of a descriptor's override: on the counter of `configured` (the limit the configuration
 * has for its entries) when that one counts on the entries' own values (`plain`: no share_threshold
 * pattern) in the override's unit.
 */
function overridden(domain: RlsDomain, o: LimitOverride, configured: RlsRule | undefined, plain: boolean): RlsRule {
  return overrideRule(domain, o, plain && configured?.rule !== undefined && configured.current.unit === UNIT_CODE[o.unit])
}

/**
 * The limits to check, in descriptor order. Descriptors answered without a check (an `unlimited`
 * limit) get their status in `statuses` here; those with no limit keep theirs. A descriptor with
 * a `limit` override is checked against it whatever the configuration says of its entries, as
 * envoyproxy/ratelimit does in a domain it has. `shadowAll` (SHADOW_MODE): every check is the
 * engine's shadow, its would-be rejects reported as such (the statuses still say OVER_LIMIT).
 */
export function planDescriptors(
  domain: RlsDomain,
  descriptors: ReadonlyArray<{ entries: Entry[]; hits: number; limit?: LimitOverride }>,
  statuses: DescriptorStatus[],
  shadowAll = false,
): PlannedDescriptor[] {
  const shares: Array<Array<string | undefined> | undefined> = []
  const rules = descriptors.map((d, i): RlsRule | undefined => {
    const limit = matchLimit(domain.root, d.entries, scratch)
    const plain = scratch.length === 0
    if (!plain) {
      // copied only when a share_threshold wildcard matched (an override counts on the values themselves)
      if (d.limit === undefined) shares[i] = scratch.slice()
      scratch.length = 0
    }
    const configured = limit === undefined ? undefined : domain.rules.get(limit)
    return d.limit === undefined ? configured : overridden(domain, d.limit, configured, plain)
  })
  // `replaces`: a matched limit naming others takes their place (they are neither counted nor reported).
  const replaced = domain.replaces ? new Set(rules.flatMap((r) => r?.replaces ?? [])) : undefined
  const planned: PlannedDescriptor[] = []
  for (let index = 0; index < rules.length; index++) {
    const answer = rules[index]
    if (answer === undefined || (answer.name !== undefined && replaced?.has(answer.name))) continue
    if (answer.rule === undefined) {
      statuses[index] = unlimitedStatus()
      continue
    }
    const d = descriptors[index]!
    const shadow = shadowAll || answer.shadow
    planned.push({ index, answer, rule: answer.rule, shadow, composite: composite(d.entries, shares[index]), cost: d.hits })
  }
  return planned
}
