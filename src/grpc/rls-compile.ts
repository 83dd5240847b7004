/**
 * The RLS configuration (grpc/rls-config.ts) compiled into the engine's own
 * form, so the engine decides a ShouldRateLimit call as it decides a request:
 * per domain a CompiledPolicy `rls:<domain>`, per configured limit a
 * CompiledRule on the window counter (algorithms/rls-limit.ts) whose counter
 * keys read `rls:<domain>_<key>_<value>…`, and the limit as the answer states
 * it (current_limit), built once. The configuration stays plain data (worker
 * threads receive it by message); each thread compiles it on first use.
 */
import { RLS_LIMIT } from '../algorithms/rls-limit.js'
import { counterLimit } from '../algorithms/kinds/window-counter/kind.js'
import type { CompiledPolicy, CompiledRule } from '../bundle/compile.js'
import type { AnsweredLimit } from '../decision/rls-answer.js'
import type { LimitTarget } from '../engine/evaluate.js'
import { readPath } from '../request/normalise.js'
import { RequestView } from '../request/view.js'
import { UNIT_CODE, UNIT_SECONDS, type RlsConfig, type RlsLimit, type RlsNode } from './rls-config.js'

/** One configured limit: the engine's rule and what the answer says of it. */
export interface RlsRule extends AnsweredLimit {
  /** Undefined for an `unlimited` limit: answered without a check. */
  rule: CompiledRule | undefined
  name: string | undefined
  replaces: readonly string[]
}

export interface RlsDomain extends LimitTarget {
  /** The configuration tree the descriptors are matched on (grpc/rls-match.ts). */
  root: RlsNode
  rules: ReadonlyMap<RlsLimit, RlsRule>
  /** Some limit of the domain replaces others. */
  replaces: boolean
}

export type CompiledRls = ReadonlyMap<string, RlsDomain>

function compileLimit(domain: string, l: RlsLimit, path: string): RlsRule {
  const prefix = `rls:${domain}_`
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
  }
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
    policy,
    view: new RequestView(input, undefined),
    root,
    rules,
    replaces: [...rules.values()].some((r) => r.replaces.length > 0),
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
