/**
 * Compilation (pure): a validated bundle document becomes the structures the engine runs per request — a
 * route index, per-rule key extractors and cost functions, match predicates, normalised algorithm configs
 * (aliases and defaults applied to the config that actually runs).
 */
import type { Algorithm, Limit, RuleAlgorithm } from '../algorithms/algorithm.js'
import { CIRCUIT_BREAKER } from '../algorithms/circuit-breaker.js'
import { ALGORITHMS } from '../algorithms/index.js'
import { LOOP_DETECTION } from '../algorithms/loop-detection.js'
import { compileDescriptor, type Extractor } from '../request/descriptors.js'
import { headerKey } from '../request/raw-headers.js'
import type { RequestView } from '../request/view.js'
import { BundleError } from '../errors.js'
import { normaliseSelectorHost } from './hosts.js'
import { foldPath, normalisePrefix, RouteIndex } from './route-index.js'
import { compilePrices, type PriceTable } from '../llm/prices.js'
import { keysAndMatch, llmParts, readsBody, type LlmRule, type SpendRule } from './compile-llm.js'
import type { RawBundle, RawKillSwitch, RawOverride, RawPolicy, RawRule } from './types.js'
import { type StatusRule, statusRuleOf } from './status-patterns.js'
import { parseTimestamp } from './validate.js'

export interface CompiledRule {
  name: string
  /** The bundle's algorithm name. */
  algorithmName: RawRule['algorithm']
  algorithm: Algorithm
  /** False when a limit key or match key does not compile (never in a validated bundle): the rule is skipped at request time. */
  supported: boolean
  keyNames: readonly string[]
  keys: readonly Extractor[]
  match: readonly { key: string; extract: Extractor; expected: string }[]
  /** The algorithm_config normalised (`limit`: the kind and parameters), and as written (`config`: the admin API shows it; none for RLS). */
  limit: Limit
  config?: Readonly<Record<string, unknown>>
  cost: (view: RequestView) => number
  /** The most one request can spend on this rule's limit: burst (token_bucket), budget (cost_based); Infinity otherwise. */
  costCap: number
  /** `<prefix><name>:` and `shadow:<prefix><name>:`, e.g. `tb:per_user:` */
  counterPrefix: string
  shadowCounterPrefix: string
  /** token_bucket_llm: the config (also `limit`, the minute bucket) and the day counter's prefixes. */
  llm?: LlmRule
  /** A cost_based budget counted in money (`"cost_key": "llm_price"`): its reservation settings and the bundle's prices. */
  spend?: SpendRule
  /** count_statuses / refund_statuses: the charge is settled on the response's status (engine/status-charges.ts). */
  statuses?: StatusRule
}

export interface CompiledPolicy {
  id: string
  ordinal: number
  shadow: boolean
  methods: ReadonlySet<string> | undefined
  hosts: ReadonlySet<string> | undefined
  pathExact: string | undefined
  pathPrefix: string | undefined
  caseSensitive: boolean
  trailingSlashSensitive: boolean
  rules: readonly CompiledRule[]
  fallback: CompiledRule | undefined
  /** loop_detection when enabled: its counter is keyed by the request's fingerprint. */
  loop: CompiledRule | undefined
  /** circuit_breaker when enabled: its counter is keyed by the policy id (and the bundle version when it resets only on reload). */
  breaker: CompiledRule | undefined
  /** Limit keys of every rule, sorted: the descriptors of the loop fingerprint. */
  descriptorKeys: readonly { name: string; extract: Extractor }[]
  /** Some rule (or the fallback) is token_bucket_llm, a money budget or reads llm:model: the proxy reads the body's first MiB before deciding. */
  llm: boolean
}

export interface CompiledKillSwitch {
  scopeKey: string
  extract: Extractor
  value: string
  /** As written, and folded (foldPath) as it is compared. */
  route: string | undefined
  routeFolded: string | undefined
  reason: string | undefined
  expiresAtMs: number | undefined
}

export interface CompiledBundle {
  version: number
  hash: string
  /** Epoch seconds of the load. */
  loadedAt: number
  source: string
  policies: readonly CompiledPolicy[]
  index: RouteIndex<CompiledPolicy>
  killSwitches: readonly CompiledKillSwitch[]
  /** Epoch ms until which global_shadow is active (undefined: never). */
  globalShadowUntil: number | undefined
  killSwitchOverrideUntil: number | undefined
  /** Some policy has an LLM rule; false keeps the proxy from even matching routes to ask (hot path). */
  llm: boolean
}

/** Positive finite number written in plain decimal, else undefined (no hex, no exponent, no Infinity). */
export function parseCost(raw: string | undefined): number | undefined {
  if (raw === undefined || !/^\s*\d+(\.\d+)?\s*$/.test(raw)) return undefined
  const n = Number(raw)
  return n > 0 && Number.isFinite(n) ? n : undefined
}

/**
 * A cost a client chooses (header or query) is raised to `min` (the rule's
 * `min_cost`, default 1): otherwise `0.000001` per request would pass a
 * million requests through a bucket of one token.
 */
function costFunction(source: string, fixed: number, dflt: number, min: number): (view: RequestView) => number {
  if (source.startsWith('header:')) {
    const h = headerKey(source.slice(7))
    return (v) => Math.max(min, parseCost(v.header(h)) ?? dflt)
  }
  if (source.startsWith('query:')) {
    const q = source.slice(6)
    return (v) => Math.max(min, parseCost(v.query(q)) ?? dflt)
  }
  return () => fixed
}

function extractorOf(key: string): Extractor {
  const d = compileDescriptor(key)
  // Descriptors are validated earlier; a rule with one that does not compile is not supported and never extracts.
  return d.ok ? d.extract : () => undefined
}

function compileRule(raw: RawRule, name: string, guard?: RuleAlgorithm, prices?: PriceTable): CompiledRule {
  const c = raw.algorithm_config
  const algorithm = guard ?? ALGORITHMS.get(raw.algorithm)
  // The schema's algorithm enum is this table's names: a validated rule always names one.
  if (algorithm === undefined) throw new BundleError(`rule "${name}": unknown algorithm "${raw.algorithm}"`)
  const keyNames = raw.limit_keys ?? []
  const descriptorsOk = [...keyNames, ...Object.keys(raw.match ?? {})].every((k) => compileDescriptor(k).ok)
  const limit = algorithm.normalise(c)
  const prefix = `${algorithm.keyPrefix}${name}:${algorithm.counterKeyPart?.(limit) ?? ''}`
  const { llm, spend, supported } = llmParts(algorithm, limit, name, prices)
  return {
    name,
    algorithmName: raw.algorithm,
    algorithm,
    supported: descriptorsOk && supported,
    keyNames,
    ...keysAndMatch(keyNames, raw.match, (llm ?? spend) !== undefined, extractorOf),
    limit,
    config: c,
    // Each algorithm names its cost field (token_bucket cost_source, cost_based cost_key).
    cost: costFunction(
      String((algorithm.costField === undefined ? undefined : c[algorithm.costField]) ?? 'fixed'),
      Number(c.fixed_cost ?? 1),
      Number(c.default_cost ?? 1),
      Number(c.min_cost ?? 1),
    ),
    costCap: algorithm.capacity?.(limit) ?? Infinity,
    counterPrefix: prefix,
    shadowCounterPrefix: `shadow:${prefix}`,
    llm,
    spend,
    statuses: statusRuleOf(raw),
  }
}

/**
 * A policy guard (loop detection, circuit breaker) as a rule of its own
 * algorithm: no limit keys (the engine builds its key), counted once per
 * request. The rule name is the policy id, so counter keys read
 * `loop:<policy>:<fingerprint>` and `cbr:<policy>:` (+ `v<version>`).
 */
function compileGuard(algorithm: RuleAlgorithm, config: object, policyId: string, version?: number): CompiledRule {
  const rule = compileRule(
    { name: policyId, algorithm: algorithm.name, algorithm_config: config as Record<string, unknown> },
    policyId,
    algorithm,
  )
  const untilReload = (rule.limit as { untilReload?: boolean }).untilReload === true
  return untilReload && version !== undefined
    ? { ...rule, counterPrefix: `${rule.counterPrefix}v${version}:`, shadowCounterPrefix: `${rule.shadowCounterPrefix}v${version}:` }
    : rule
}

function activeUntil(o: RawOverride | undefined): number | undefined {
  return o?.enabled === true && o.expires_at ? parseTimestamp(o.expires_at) : undefined
}

function compileKillSwitch(k: RawKillSwitch): CompiledKillSwitch {
  return {
    scopeKey: k.scope_key,
    extract: extractorOf(k.scope_key),
    value: k.scope_value,
    route: k.route,
    routeFolded: k.route === undefined ? undefined : foldPath(k.route),
    reason: k.reason,
    expiresAtMs: k.expires_at ? parseTimestamp(k.expires_at) : undefined,
  }
}

/**
 * `policies` must already be the valid ones, duplicates resolved (last wins).
 * They are sorted by id here: evaluation order is policy-id order (docs/behaviour.md §4).
 */
export function compileBundle(
  doc: RawBundle,
  policies: readonly RawPolicy[],
  meta: { hash: string; loadedAt: number; source: string },
): CompiledBundle {
  const sorted = [...policies].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
  const prices = doc.llm_prices === undefined ? undefined : compilePrices(doc.llm_prices)
  const compiled: CompiledPolicy[] = sorted.map((p, ordinal) => {
    const s = p.spec.selector
    const rules = p.spec.rules.map((r) => compileRule(r, r.name!, undefined, prices))
    const fallback = p.spec.fallback_limit
      ? compileRule(p.spec.fallback_limit, p.spec.fallback_limit.name ?? `${p.id}:fallback_limit`, undefined, prices)
      : undefined
    return {
      id: p.id,
      ordinal,
      shadow: p.spec.mode === 'shadow',
      methods: s.methods ? new Set(s.methods) : undefined,
      hosts: s.hosts ? new Set(s.hosts.map(normaliseSelectorHost)) : undefined,
      pathExact: s.pathExact,
      pathPrefix: s.pathPrefix === undefined ? undefined : normalisePrefix(s.pathPrefix),
      caseSensitive: s.pathCaseSensitive === true,
      trailingSlashSensitive: s.pathTrailingSlashSensitive === true,
      rules,
      fallback,
      loop: p.spec.loop_detection?.enabled ? compileGuard(LOOP_DETECTION as RuleAlgorithm, p.spec.loop_detection, p.id) : undefined,
      breaker: p.spec.circuit_breaker?.enabled
        ? compileGuard(CIRCUIT_BREAKER as RuleAlgorithm, p.spec.circuit_breaker, p.id, doc.bundle_version)
        : undefined,
      descriptorKeys: [...new Set(p.spec.rules.flatMap((r) => r.limit_keys ?? []))]
        .sort()
        .map((name) => ({ name, extract: extractorOf(name) })),
      llm: rules.some(readsBody) || (fallback !== undefined && readsBody(fallback)),
    }
  })
  return {
    version: doc.bundle_version,
    hash: meta.hash,
    loadedAt: meta.loadedAt,
    source: meta.source,
    policies: compiled,
    index: new RouteIndex(compiled),
    killSwitches: (doc.kill_switches ?? []).map(compileKillSwitch),
    globalShadowUntil: activeUntil(doc.global_shadow),
    killSwitchOverrideUntil: activeUntil(doc.kill_switch_override),
    llm: compiled.some((p) => p.llm),
  }
}
