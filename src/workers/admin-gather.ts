/**
 * The admin API with worker threads (docs/admin.md): a worker's admin listener asks the supervisor
 * for the process's view ('admin'); the supervisor asks every live worker for its part
 * ('admin-collect': its rejected keys and decision counts), merges them (observe/admin-view.ts),
 * adds the reload history it alone keeps, and answers the worker that asked ('admin-view'). A
 * worker that exits meanwhile counts as empty. The same round as /metrics' (metrics-sum.ts).
 */
import type { Worker } from 'node:worker_threads'
import { mergeViews, type ProcessView, type ThreadView } from '../observe/admin-view.js'
import type { ReloadEntry } from '../observe/reload-history.js'
import type { FromWorker, ToWorker } from './messages.js'

export class AdminGather {
  private seq = 0
  /** Parts asked of a worker and not answered yet. */
  private readonly waiting = new Map<number, { worker: Worker; resolve(view: ThreadView | undefined): void }>()

  constructor(
    /** The workers serving now. */
    private readonly live: () => Worker[],
    /** The bundle's last loads (config-share.ts). */
    private readonly reloads: () => ReloadEntry[],
  ) {}

  async view(): Promise<ProcessView> {
    const parts = await Promise.all(
      this.live().map(
        (worker) =>
          new Promise<ThreadView | undefined>((resolve) => {
            const id = ++this.seq
            this.waiting.set(id, { worker, resolve })
            worker.postMessage({ type: 'admin-collect', id } satisfies ToWorker)
          }),
      ),
    )
    return { ...mergeViews(parts.filter((p) => p !== undefined)), reloads: this.reloads() }
  }

  /** Handles this module's messages from `worker`; false for the others. */
  onMessage(worker: Worker, m: FromWorker): boolean {
    if (m.type === 'admin-collected') {
      this.waiting.get(m.id)?.resolve(m.view)
      this.waiting.delete(m.id)
      return true
    }
    if (m.type !== 'admin') return false
    this.view().then(
      (view) => worker.postMessage({ type: 'admin-view', id: m.id, view } satisfies ToWorker),
      (err: Error) => worker.postMessage({ type: 'admin-view', id: m.id, error: err.message } satisfies ToWorker),
    )
    return true
  }

  /** `worker` exited: what it was asked answers empty. */
  exited(worker: Worker): void {
    for (const [n, w] of this.waiting) {
      if (w.worker !== worker) continue
      w.resolve(undefined)
      this.waiting.delete(n)
    }
  }
}
