/**
 * What the admin API reads of the whole process (docs/admin.md): the rejected keys
 * (rejected-keys.ts), the decision counts (decision-stats.ts) and the bundle's reload history
 * (reload-history.ts). Each thread contributes its ThreadView; with worker threads the supervisor
 * merges theirs (workers/admin-gather.ts) and adds the history it alone keeps. Plain data: it
 * crosses threads.
 */
import { addStats, type DecisionStats, noStats, readStats } from './decision-stats.js'
import type { Metrics } from './metrics.js'
import type { RejectedKeys, TopSnapshot } from './rejected-keys.js'
import type { ReloadEntry } from './reload-history.js'
import { topItemId } from './rejected-keys.js'
import { mergeSnapshots } from './space-saving.js'

export interface ThreadView {
  top: TopSnapshot
  stats: DecisionStats
}

export interface ProcessView extends ThreadView {
  reloads: ReloadEntry[]
}

/** This thread's part: its rejected keys (none recorded without the admin API) and its decision counts. */
export async function threadView(
  keys: Pick<RejectedKeys<unknown>, 'snapshot'> | undefined,
  metrics: Pick<Metrics, 'decisions' | 'shadowRejects'>,
  nowMs: number,
): Promise<ThreadView> {
  return { top: keys?.snapshot(nowMs) ?? { entries: [], floor: 0, total: 0 }, stats: await readStats(metrics) }
}

/** Several threads' parts as one. */
export function mergeViews(parts: readonly ThreadView[]): ThreadView {
  if (parts.length === 0) return { top: { entries: [], floor: 0, total: 0 }, stats: noStats() }
  return {
    top: mergeSnapshots(
      parts.map((p) => p.top),
      topItemId,
    ),
    stats: addStats(parts.map((p) => p.stats)),
  }
}
