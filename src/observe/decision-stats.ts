/**
 * `GET /v1/admin/stats` (docs/admin.md): the decisions made so far, by outcome, and the rejects by
 * reason, read from the metrics every decision already counts (fairvisor_decisions_total,
 * fairvisor_shadow_would_reject_total), so the figures are /metrics' own. Cumulative: a client reads
 * twice and divides by the time between. With worker threads each thread reads its own and the
 * supervisor adds them (workers/admin-gather.ts).
 */
import type { Metrics } from './metrics.js'

export interface DecisionStats {
  decisions: { allow: number; reject: number; shadow_reject: number }
  /** Enforced rejects (429, and 400 refusals) by reason. */
  rejects_by_reason: Record<string, number>
}

export const noStats = (): DecisionStats => ({ decisions: { allow: 0, reject: 0, shadow_reject: 0 }, rejects_by_reason: {} })

/** This thread's counts (reading the counters flushes the per-request tallies into them: hot-metrics.ts). */
export async function readStats(metrics: Pick<Metrics, 'decisions' | 'shadowRejects'>): Promise<DecisionStats> {
  const out = noStats()
  for (const v of (await metrics.decisions.get()).values) {
    const action = v.labels.action
    if (action === 'allow') out.decisions.allow += v.value
    else if (action === 'reject') {
      out.decisions.reject += v.value
      const reason = String(v.labels.reason)
      out.rejects_by_reason[reason] = (out.rejects_by_reason[reason] ?? 0) + v.value
    }
  }
  for (const v of (await metrics.shadowRejects.get()).values) out.decisions.shadow_reject += v.value
  return out
}

/** The sum of several threads' counts. */
export function addStats(parts: readonly DecisionStats[]): DecisionStats {
  const out = noStats()
  for (const p of parts) {
    out.decisions.allow += p.decisions.allow
    out.decisions.reject += p.decisions.reject
    out.decisions.shadow_reject += p.decisions.shadow_reject
    for (const [reason, n] of Object.entries(p.rejects_by_reason)) out.rejects_by_reason[reason] = (out.rejects_by_reason[reason] ?? 0) + n
  }
  return out
}
