/**
 * `GET /v1/admin/bundle` (docs/admin.md): the bundle in force (version, hash, where it was read,
 * when), how the gateway runs it (mode, workers, store and its health), each policy with its rules
 * (algorithm, algorithm_config as written, limit keys) and the last reloads.
 */
import type { CompiledBundle, CompiledPolicy, CompiledRule } from '../bundle/compile.js'
import { storeHealth } from '../http/health.js'
import type { ReloadEntry } from '../observe/reload-history.js'
import type { Settings } from '../settings.js'
import type { FailPolicy, Store } from '../store/store.js'
import { ruleLabel } from './counters.js'

function ruleView(policy: CompiledPolicy, rule: CompiledRule): Record<string, unknown> {
  return {
    name: ruleLabel(policy, rule),
    algorithm: rule.algorithmName,
    algorithm_config: rule.config ?? {},
    limit_keys: [...rule.keyNames],
  }
}

/** A policy's rules, then its fallback and guards (named as the counters route names them). */
function policyView(p: CompiledPolicy): Record<string, unknown> {
  const rules = [...p.rules, p.fallback, p.loop, p.breaker].filter((r) => r !== undefined)
  return { id: p.id, mode: p.shadow ? 'shadow' : 'enforce', rules: rules.map((r) => ruleView(p, r)) }
}

/** The store's kind as the admin API names it: the in-process store shared by worker threads is `shared`. */
export function storeKind(store: Store, workers: number): string {
  return store.kind === 'memory' && workers > 1 ? 'shared' : store.kind
}

export function bundleAnswer(
  bundle: CompiledBundle | null,
  reloads: ReloadEntry[],
  settings: Pick<Settings, 'mode' | 'workers' | 'configFile'>,
  store: Store,
  failPolicy: FailPolicy,
): Record<string, unknown> {
  return {
    version: bundle === null ? null : String(bundle.version),
    hash: bundle?.hash ?? null,
    source: bundle?.source ?? settings.configFile ?? null,
    loaded_at: bundle === null ? null : new Date(bundle.loadedAt * 1000).toISOString(),
    mode: settings.mode,
    workers: settings.workers,
    store: { kind: storeKind(store, settings.workers), healthy: storeHealth(store, failPolicy).state === 'ok' },
    policies: bundle?.policies.map(policyView) ?? [],
    reloads,
  }
}
