/**
 * The RLS configuration (grpc/rls-config.ts) compiled into the engine's own
 * form, so the engine decides a ShouldRateLimit call as it decides a request:
 * per domain a CompiledPolicy `rls:<domain>`, per configured limit a
 * CompiledRule on the window counter (algorithms/rls-limit.ts) whose counter
 * keys read `rls:<domain>_<key>_<value>…`, and the limit as the answer states
 * it (current_limit, metadata), built once; a call's limit overrides get
 * rules of the same kind, made when first asked for. The configuration stays
 * plain data (worker threads receive it by message); each thread compiles it
 * on first use.
 */
import { RLS_LIMIT } from '../algorithms/rls-limit.js'
import { counterLimit } from '../algorithms/kinds/window-counter/kind.js'
import { BoundedMemo } from '../bounded-cache.js'
import type { CompiledPolicy, CompiledRule } from '../bundle/compile.js'
import type { AnsweredLimit } from '../decision/rls-answer.js'
import { toStruct, type Struct } from '../decision/rls-metadata.js'
import type { LimitTarget } from '../engine/evaluate.js'
import { readPath } from '../request/normalise.js'
import { RequestView } from '../request/view.js'
import { UNIT_CODE, UNIT_SECONDS, type RlsConfig, type RlsLimit, type RlsNode, type Unit } from './rls-config.js'

/** One configured limit: the engine's rule and what the answer says of it. */
export interface RlsRule extends AnsweredLimit {
  /** Undefined for an `unlimited` limit: answered without a check. */
  rule: CompiledRule | undefined
  name: string | undefined
  replaces: readonly string[]
  /** The configured `metadata:`, as the answer's dynamic metadata carries it. */
  metadata?: Struct
}

export interface RlsDomain extends LimitTarget {
  name: string
  /** The configuration tree the descriptors are matched on (grpc/rls-match.ts). */
  root: RlsNode
  rules: ReadonlyMap<RlsLimit, RlsRule>
  /** Some limit of the domain replaces others. */
  replaces: boolean
  /** The rules of the limit overrides calls carry (overrideRule), made on first use. */
  overrides: BoundedMemo<string, RlsRule>
}

export type CompiledRls = ReadonlyMap<string, RlsDomain>

/** A descriptor's own limit (RateLimitDescriptor.limit), in place of the configured one. */
export interface LimitOverride {
  requestsPerUnit: number
  unit: Unit
}

function compileLimit(domain: string, l: RlsLimit, path: string, prefix = `rls:${domain}_`): RlsRule {
  const rule: CompiledRule | undefined = l.unlimited
    ? undefined
    : {
        name: l.name || path,
        algorithmName: RLS_LIMIT.name,
        algorithm: RLS_LIMIT,
        supported: true,
        keyNames: [],
        keys: [],
        match: [],
        // Windows start at multiples of the unit since the epoch, as envoyproxy/ratelimit's do.
        limit: counterLimit(l.requestsPerUnit, UNIT_SECONDS[l.unit], 0),
        cost: () => 1, // each descriptor brings its own (hits_addend)
        costCap: Infinity,
        // The same counter whether the limit is in shadow_mode or not.
        counterPrefix: prefix,
        shadowCounterPrefix: prefix,
      }
  return {
    rule,
    shadow: l.shadow,
    quota: l.quota === true,
    current: { requests_per_unit: l.requestsPerUnit, unit: UNIT_CODE[l.unit], ...(l.name ? { name: l.name } : {}) },
    name: l.name,
    replaces: l.replaces,
    ...(l.metadata === undefined ? {} : { metadata: toStruct(l.metadata) }),
  }
}

/**
 * The rule of a descriptor's limit override, as envoyproxy/ratelimit makes it: the override's rate
 * and unit, never shadow nor quota, no name, no metadata. Its counter is the descriptor's own (the
 * entries' values, no share_threshold pattern): upstream keys a counter by entries and unit window,
 * so the one it shares with the configured limit of the same entries is the one of the same unit.
 * `shared`: that limit has this unit, and the counter key is its (`rls:<domain>_…`); otherwise the
 * override counts apart, under `rls@<unit>:<domain>_…`.
 */
export function overrideRule(domain: RlsDomain, o: LimitOverride, shared: boolean): RlsRule {
  const key = `${o.requestsPerUnit} ${o.unit} ${shared}`
  let r = domain.overrides.get(key)
  if (r === undefined) {
    const l: RlsLimit = {
      unit: o.unit,
      requestsPerUnit: o.requestsPerUnit,
      unlimited: false,
      name: undefined,
      replaces: [],
      shadow: false,
      detailedMetric: false,
    }
    const prefix = shared ? `rls:${domain.name}_` : `rls@${o.unit}:${domain.name}_`
    r = compileLimit(domain.name, l, `limit override ${o.requestsPerUnit} per ${o.unit}`, prefix)
    domain.overrides.set(key, r)
  }
  return r
}

function compileDomain(domain: string, root: RlsNode): RlsDomain {
  const rules = new Map<RlsLimit, RlsRule>()
  // A rule without a name is named by where it is in the tree (`key_value.key`), for logs.
  const walk = (node: RlsNode, path: string): void => {
    if (node.limit !== undefined) rules.set(node.limit, compileLimit(domain, node.limit, path))
    const at = path === '' ? '' : `${path}.`
    for (const [k, child] of node.children) walk(child, at + k)
  }
  walk(root, '')
  const compiled = [...rules.values()].flatMap((r) => (r.rule === undefined ? [] : [r.rule]))
  const policy: CompiledPolicy = {
    id: `rls:${domain}`,
    ordinal: 0,
    shadow: false,
    methods: undefined,
    hosts: undefined,
    pathExact: undefined,
    pathPrefix: undefined,
    caseSensitive: true,
    trailingSlashSensitive: true,
    rules: compiled,
    fallback: undefined,
    loop: undefined,
    breaker: undefined,
    descriptorKeys: [],
    llm: false,
  }
  // The call as a request `POST /<domain>`, as a bundle reads it (grpc/rls-bundle.ts): all its inputs are fixed.
  const input = { method: 'POST', path: readPath(`/${domain}`, 'keep').path, rawQuery: '', host: '', rawHeaders: [], peer: '' }
  return {
    name: domain,
    policy,
    view: new RequestView(input, undefined),
    root,
    rules,
    replaces: [...rules.values()].some((r) => r.replaces.length > 0),
    // Rates come from calls: bounded, emptied whole when full (a rule is cheap to make again).
    overrides: new BoundedMemo(1024),
  }
}

const compiled = new WeakMap<RlsConfig, CompiledRls>()

/** `config` compiled, once per configuration object (a reload brings a new one). */
export function compileRls(config: RlsConfig): CompiledRls {
  let c = compiled.get(config)
  if (c === undefined) {
    c = new Map([...config].map(([domain, root]) => [domain, compileDomain(domain, root)]))
    compiled.set(config, c)
  }
  return c
}
