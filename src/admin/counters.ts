/**
 * `GET` and `DELETE /v1/admin/counters?policy=&rule=&key=` (docs/admin.md): one key's counter of one
 * rule of the bundle in force, read without charging it or reset, on whatever store runs.
 *
 * `key` is the rule's limit-key values joined with `|`, as `GET /v1/admin/top` shows them: a
 * credential (an API key, a bearer token) is shown there as its logged hash, and such a hash passed
 * back is mapped to the counter through the rejected keys the gateway keeps (so it names a counter
 * while its key is among them); the credential itself always works. The policy's guards are named
 * `loop_detection` and `circuit_breaker`. A shadow policy (or any policy while the bundle's
 * global_shadow is on) counts on its `shadow:` counters, which are the ones read and reset then.
 */
import { utcDay } from '../algorithms/llm.js'
import type { CompiledBundle, CompiledPolicy, CompiledRule } from '../bundle/compile.js'
import { holdsShortHash, isSecretDescriptor } from '../engine/log-key.js'
import { AdminRequestError } from '../errors.js'
import type { ProcessView } from '../observe/admin-view.js'
import type { Check, Outcome, Store } from '../store/store.js'

/** The names the admin API gives a policy's guards (their compiled rules carry the policy id). */
const GUARDS = { loop: 'loop_detection', breaker: 'circuit_breaker' } as const

/** The name a rule of `policy` goes by in the admin API. */
export function ruleLabel(policy: CompiledPolicy, rule: CompiledRule): string {
  return rule === policy.loop ? GUARDS.loop : rule === policy.breaker ? GUARDS.breaker : rule.name
}

/** The rule of `policy` named `label`: one of its rules, its fallback, or a guard. */
export function ruleByLabel(policy: CompiledPolicy, label: string): CompiledRule | undefined {
  const rule = policy.rules.find((r) => r.name === label) ?? (policy.fallback?.name === label ? policy.fallback : undefined)
  if (rule !== undefined) return rule
  return label === GUARDS.loop ? policy.loop : label === GUARDS.breaker ? policy.breaker : undefined
}

/** A counter request: what it names, as given. */
export interface CounterQuery {
  policy: string
  rule: string
  key: string
}

/** What a counter request names in the bundle in force: the rule, the key's values and its counters' keys. */
export interface CounterTarget {
  rule: CompiledRule
  composite: string
  shadow: boolean
  /** The counter keys: the rule's, and an LLM rule's day counter of today. */
  keys: string[]
}

/** The query's three parameters, each required and non-empty. */
export function counterQuery(params: URLSearchParams): CounterQuery {
  const [policy, rule, key] = ['policy', 'rule', 'key'].map((name) => {
    const v = params.get(name)
    if (v === null || v === '') throw new AdminRequestError('admin_bad_request', `the ${name} parameter is required`)
    return v
  }) as [string, string, string]
  return { policy, rule, key }
}

/**
 * The counter `q` names at `nowMs`; `view` is asked for the rejected keys only when the rule keys on a
 * credential and `q.key` may be its hash.
 */
export async function resolveCounter(
  bundle: CompiledBundle | null,
  q: CounterQuery,
  nowMs: number,
  view: () => Promise<ProcessView>,
): Promise<CounterTarget> {
  if (bundle === null) throw new AdminRequestError('admin_unknown_rule', 'no bundle is loaded')
  const policy = bundle.policies.find((p) => p.id === q.policy)
  if (policy === undefined) throw new AdminRequestError('admin_unknown_rule', `no policy "${q.policy}" in bundle version ${bundle.version}`)
  const rule = ruleByLabel(policy, q.rule)
  if (rule === undefined) throw new AdminRequestError('admin_unknown_rule', `policy "${q.policy}" has no rule "${q.rule}"`)
  let composite = q.key
  if (rule.keyNames.some(isSecretDescriptor) && holdsShortHash(q.key)) {
    const seen = (await view()).top.entries.find((e) => e.item.policy === q.policy && e.item.rule === q.rule && e.item.key === q.key)
    if (seen === undefined)
      throw new AdminRequestError(
        'admin_unknown_key',
        `"${q.key}" is a credential's hash that names no key rejected lately (GET /v1/admin/top); pass the credential itself`,
      )
    composite = seen.item.composite
  }
  const shadow = policy.shadow || (bundle.globalShadowUntil !== undefined && nowMs < bundle.globalShadowUntil)
  const keys = [(shadow ? rule.shadowCounterPrefix : rule.counterPrefix) + composite]
  const llm = rule.llm
  if (llm?.config.day !== undefined) keys.push(`${shadow ? llm.shadowDayPrefix : llm.dayPrefix}${composite}:${utcDay(nowMs)}`)
  return { rule, composite, shadow, keys }
}

/**
 * The rule's counter at `nowMs`: an in-process store peeks at it; a remote one is sent a check of cost 0
 * (it charges nothing; it may write the counter's refill), without the rule's lease, so it reaches the
 * server and takes no slice.
 */
export function readCounter(store: Store, t: CounterTarget, nowMs: number): Promise<Outcome> {
  const { lease: _lease, ...limit } = t.rule.limit
  const check: Check = { key: t.keys[0]!, limit, cost: 0, shadow: t.shadow }
  if (store.peek !== undefined) return Promise.resolve(store.peek(check, nowMs / 1000))
  return new Promise((resolve, reject) =>
    store.apply([check], nowMs / 1000, (err, out) => {
      if (err) reject(new AdminRequestError('admin_store_failed', `the ${store.kind} store could not read the counter: ${err.message}`))
      else resolve(out![0]!)
    }),
  )
}

/** What `GET` answers: the counter as the rule's RateLimit-* headers would show it. */
export function counterAnswer(q: CounterQuery, t: CounterTarget, o: Outcome): Record<string, unknown> {
  const h = t.rule.algorithm.headers(t.rule.limit, o.value, o.retryAfter, !o.allowed)
  return {
    policy: q.policy,
    rule: q.rule,
    key: q.key,
    algorithm: t.rule.algorithmName,
    limit: h?.limit ?? null,
    remaining: h?.remaining ?? null,
    reset_seconds: h?.resetS ?? null,
    // No limit kind of this build counts requests in flight.
    in_flight: null,
  }
}

/** Forgets the target's counters on the store in use. */
export function resetCounter(store: Store, t: CounterTarget): Promise<void> {
  const reset = store.reset
  if (reset === undefined)
    return Promise.reject(new AdminRequestError('admin_reset_unsupported', `the ${store.kind} store cannot reset counters`))
  return new Promise((resolve, reject) =>
    reset.call(store, t.keys, (err) =>
      err
        ? reject(new AdminRequestError('admin_store_failed', `the ${store.kind} store could not reset the counter: ${err.message}`))
        : resolve(),
    ),
  )
}
