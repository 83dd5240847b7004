/**
 * /metrics with worker threads: one view summed over every live worker's
 * registry plus the supervisor's own (reload counters, bundle gauges), each
 * metric by its aggregator. A worker's listener asks the supervisor for it
 * ('metrics'), the supervisor asks every worker for its registry
 * ('collect'), and a worker that exits meanwhile counts as empty.
 */
import type { Worker } from 'node:worker_threads'
import { AggregatorRegistry, type Registry } from 'prom-client'
import type { FromWorker, MetricsJson, ToWorker } from './messages.js'

export class MetricsSum {
  private seq = 0
  /** Registries asked of a worker and not answered yet. */
  private readonly waiting = new Map<number, { worker: Worker; resolve(json: MetricsJson): void }>()

  constructor(
    private readonly own: Registry,
    /** The workers serving now. */
    private readonly live: () => Worker[],
  ) {}

  async text(): Promise<string> {
    const parts = await Promise.all(
      this.live().map(
        (worker) =>
          new Promise<MetricsJson>((resolve) => {
            const id = ++this.seq
            this.waiting.set(id, { worker, resolve })
            worker.postMessage({ type: 'collect', id } satisfies ToWorker)
          }),
      ),
    )
    parts.push(await this.own.getMetricsAsJSON())
    return AggregatorRegistry.aggregate(parts).metrics()
  }

  /** Handles this module's messages from `worker`; false for the others. */
  onMessage(worker: Worker, m: FromWorker): boolean {
    if (m.type === 'collected') {
      this.waiting.get(m.id)?.resolve(m.json)
      this.waiting.delete(m.id)
      return true
    }
    if (m.type !== 'metrics') return false
    this.text().then(
      (text) => worker.postMessage({ type: 'metrics-text', id: m.id, text } satisfies ToWorker),
      (err: Error) => worker.postMessage({ type: 'metrics-text', id: m.id, error: err.message } satisfies ToWorker),
    )
    return true
  }

  /** `worker` exited: what it was asked answers empty. */
  exited(worker: Worker): void {
    for (const [n, w] of this.waiting) {
      if (w.worker !== worker) continue
      w.resolve([])
      this.waiting.delete(n)
    }
  }
}
