/**
 * A worker's side of the bundle and the RLS configuration: built from what
 * the supervisor hands it (workerData, then 'bundle' and 'rls' messages),
 * never from the files, which may hold an older, invalid or refused bundle by
 * then. The worker's runtime (runtime/worker-thread.ts) hands these messages
 * on from the thread's first moment, so a bundle applied while the worker
 * starts is the one it serves with.
 * Each build is written to the generations table (for /readyz) and
 * acknowledged to the supervisor, which reports a reload once all have it.
 */
import type { CompiledBundle } from '../bundle/compile.js'
import { buildAccepted, type AcceptedBundle, type BundleSourceOptions } from '../bundle/source.js'
import type { RlsConfig } from '../grpc/rls-config.js'
import type { BundleFeed } from '../runtime/runtime.js'
import { Generations } from './generations.js'
import type { FromWorker, ToWorker, WorkerData } from './messages.js'

export class WorkerConfigFeed implements BundleFeed {
  private current: CompiledBundle | null = null
  private generation = -1
  private rlsConfig: RlsConfig | undefined
  private readonly table: Generations
  private readonly id: number

  constructor(
    data: WorkerData,
    private readonly opts: BundleSourceOptions,
    private readonly send: (m: FromWorker) => void,
  ) {
    this.id = data.workerId
    this.table = Generations.attach(data.generations)
    this.rlsConfig = data.rls
    const error = this.install(data.bundle, data.generation)
    if (error !== undefined) send({ type: 'reloaded', asked: data.generation, generation: this.generation, error })
  }

  bundle(): CompiledBundle | null {
    return this.current
  }

  rls(): RlsConfig | undefined {
    return this.rlsConfig
  }

  inSync(): boolean {
    return this.table.inSync()
  }

  /** Nothing to read: the supervisor did, and feeds this thread. */
  async start(): Promise<void> {}

  async close(): Promise<void> {}

  /** Handles this module's messages; false for the others. */
  onMessage(m: ToWorker): boolean {
    if (m.type === 'rls') {
      this.rlsConfig = m.config
      return true
    }
    if (m.type !== 'bundle') return false
    const error = this.install(m.bundle, m.generation)
    this.send({ type: 'reloaded', asked: m.generation, generation: this.generation, ...(error === undefined ? {} : { error }) })
    return true
  }

  /** Run `bundle` unless this thread runs a newer one already; the error when it did not build. */
  private install(bundle: AcceptedBundle | undefined, generation: number): string | undefined {
    if (generation <= this.generation) return undefined
    let error: string | undefined
    try {
      // Same bytes, options and load time as the supervisor's: the same bundle (see buildAccepted).
      this.current = bundle === undefined ? null : buildAccepted(bundle, this.opts)
      this.generation = generation
    } catch (err) {
      error = (err as Error).message
    }
    this.table.runs(this.id, this.generation)
    return error
  }
}
