/**
 * `GET /v1/admin/top?n=20` (docs/admin.md): the keys rejected most in the last half window to whole
 * window (FAIRVISOR_ADMIN_TOP_WINDOW_S), per policy, rule and reason, from each thread's Space-Saving
 * sketches (observe/rejected-keys.ts) merged over the process. `count` and `error` are Space-Saving's:
 * the key was rejected at most `count` and at least `count − error` times in that window.
 */
import type { CompiledRule } from '../bundle/compile.js'
import type { EngineObserver } from '../engine/decision.js'
import { shownKey } from '../engine/log-key.js'
import { AdminRequestError } from '../errors.js'
import type { ProcessView } from '../observe/admin-view.js'
import { type RejectGroup, RejectedKeys } from '../observe/rejected-keys.js'
import type { Settings } from '../settings.js'
import { topEntries } from '../observe/space-saving.js'
import { ruleLabel } from './counters.js'

/** Entries one answer may hold. */
export const MAX_TOP = 1000

/** The sketch of rejected keys (FAIRVISOR_ADMIN_TOP_KEYS, FAIRVISOR_ADMIN_TOP_WINDOW_S) when the admin API is on; none otherwise. */
export function rejectedKeys(
  settings: Pick<Settings, 'adminToken' | 'adminTopKeys' | 'adminTopWindowS'>,
  nowMs: number,
): RejectedKeys<CompiledRule> | undefined {
  if (settings.adminToken === undefined) return undefined
  return new RejectedKeys(settings.adminTopKeys, settings.adminTopWindowS * 1000, shownKey, nowMs)
}

/** Names of (policy, rule, reason) groups kept; past it they are made anew (RLS limit overrides can name many). */
const MAX_GROUPS = 10_000

/**
 * The engine's reject hook feeding `keys`: every enforced or shadow reject of a limit with a key. A
 * reject finds its group by its compiled rule and reason (no string built); a rule compiled anew by a
 * reload finds the group of the same names, so a key counts on across reloads.
 */
export function recordRejects(keys: RejectedKeys<CompiledRule>): NonNullable<EngineObserver['rejected']> {
  const byRule = new WeakMap<CompiledRule, Map<string, RejectGroup<CompiledRule>>>()
  const byName = new Map<string, RejectGroup<CompiledRule>>()
  return (policy, rule, reason, composite, nowMs) => {
    let byReason = byRule.get(rule)
    if (byReason === undefined) byRule.set(rule, (byReason = new Map()))
    let group = byReason.get(reason)
    if (group === undefined) {
      const label = ruleLabel(policy, rule)
      const name = `${policy.id}\0${label}\0${reason}`
      if (byName.size >= MAX_GROUPS) byName.clear()
      group = byName.get(name) ?? { policy: policy.id, rule: label, reason, source: rule }
      group.source = rule // the newest rule shows the key
      byName.set(name, group)
      byReason.set(reason, group)
    }
    keys.record(group, composite, nowMs)
  }
}

/** `n`: 20 when absent, else a whole number from 1 to MAX_TOP. */
export function topCount(params: URLSearchParams): number {
  const raw = params.get('n')
  if (raw === null || raw === '') return 20
  const n = /^\d+$/.test(raw) ? Number(raw) : Number.NaN
  if (!(n >= 1 && n <= MAX_TOP)) throw new AdminRequestError('admin_bad_request', `n must be a whole number from 1 to ${MAX_TOP}`)
  return n
}

/** The answer: the `n` keys counted most, as shown (never a credential in clear). */
export function topAnswer(view: ProcessView, n: number, windowS: number): Record<string, unknown> {
  return {
    window_seconds: windowS,
    entries: topEntries(view.top, n).map((e) => ({
      policy: e.item.policy,
      rule: e.item.rule,
      reason: e.item.reason,
      key: e.item.key,
      count: e.count,
      error: e.error,
    })),
  }
}
