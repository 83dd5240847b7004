/**
 * The supervisor's side of the bundle and the RLS configuration: the one
 * place that reads, validates, compiles and watches them. Workers never read
 * those files (which may hold an older, invalid or refused bundle by the
 * time a worker starts): each gets the bundle in force when it starts
 * (workerData) and every bundle applied later ('bundle' messages), as the
 * exact bytes accepted, and builds the same bundle from them
 * (worker-config.ts). So a worker restarted after a refused reload, or after
 * the file was replaced by an older or broken one, runs the last good bundle.
 *
 * The watches are armed before the first read and before any worker starts,
 * so a file replaced at any moment of start-up reaches every worker. An
 * applied bundle is shown in fairvisor_config_info at once, and logged and
 * counted once every worker runs it; meanwhile /readyz answers 503 in every
 * worker (generations.ts), so it never names another version than the metric.
 */
import type { Worker } from 'node:worker_threads'
import type { CompiledBundle } from '../bundle/compile.js'
import type { ReloadReport } from '../bundle/source.js'
import type { Logger } from '../observe/logger.js'
import type { Metrics } from '../observe/metrics.js'
import type { ReloadEntry } from '../observe/reload-history.js'
import { logReload, showConfig } from '../observe/reload-log.js'
import { rlsLoadsOf } from '../observe/rls-stats-sinks.js'
import { ConfigSource } from '../runtime/config-source.js'
import type { Settings } from '../settings.js'
import { Generations } from './generations.js'
import type { FromWorker, ToWorker, WorkerData } from './messages.js'

type Reloaded = Extract<FromWorker, { type: 'reloaded' }>

export class ConfigShare {
  /** What the supervisor itself runs: read and watched here (runtime/config-source.ts, as in one thread). */
  private readonly source: ConfigSource
  private readonly generations: Generations
  private readonly rlsLoads: ReturnType<typeof rlsLoadsOf>
  private generation = 0
  /** Every worker thread started and not exited (starting ones too: messages wait in their port). */
  private readonly workers = new Set<Worker>()
  /** Acknowledgements awaited, per worker: the generation asked for. */
  private readonly waiting = new Map<Worker, Map<number, (generation: number | null) => void>>()
  /** Reload reports in order, each after its workers acknowledged. */
  private reporting = Promise.resolve()

  constructor(
    settings: Readonly<Settings>,
    private readonly log: Logger,
    private readonly metrics: Metrics,
    clock: () => number,
  ) {
    this.generations = Generations.create(settings.workers)
    // The workers never load it: its loads are counted here, in the supervisor's registry that /metrics adds to theirs.
    this.rlsLoads = rlsLoadsOf(metrics.registry, settings, log)
    this.source = new ConfigSource(settings, log, clock, {
      reloaded: (r) => this.onReport(r),
      rlsLoaded: (config) => this.post({ type: 'rls', config }),
      rlsLoadResult: this.rlsLoads?.loaded,
    })
  }

  /** The supervisor's bundle (null while it has none). */
  bundle(): CompiledBundle | null {
    return this.source.bundle()
  }

  /** The bundle's last loads, whatever their result (the admin API's bundle view). */
  reloads(): ReloadEntry[] {
    return this.source.history.list()
  }

  /** Arm the watches, then read the bundle and the RLS configuration: before any worker starts. */
  start(): Promise<void> {
    return this.source.start()
  }

  /** SIGHUP: reload both now, and set the bundle's watch up anew (its directory may be another one now). */
  readonly onHup = (): void => this.source.onHup()

  /**
   * What a worker starting now gets (its workerData). Make the Worker and
   * call started() in the same tick, so that no reload falls between them.
   */
  forWorker(): Pick<WorkerData, 'bundle' | 'generation' | 'generations' | 'rls'> {
    return {
      bundle: this.source.bundles.accepted,
      generation: this.generation,
      generations: this.generations.buffer,
      rls: this.source.rls(),
    }
  }

  /** From now on `worker` gets every bundle applied and RLS configuration loaded. */
  started(worker: Worker): void {
    this.workers.add(worker)
  }

  /** `worker` (number `id`) exited: it serves nothing any more and acknowledges nothing. */
  exited(worker: Worker, id: number): void {
    this.workers.delete(worker)
    this.generations.stopped(id)
    for (const resolve of this.waiting.get(worker)?.values() ?? []) resolve(null)
    this.waiting.delete(worker)
  }

  onReloaded(worker: Worker, id: number, m: Reloaded): void {
    if (m.error !== undefined)
      this.log.error(
        { worker: id, generation: m.generation, err: { message: m.error } },
        'a worker could not build the bundle; it keeps its own',
      )
    this.waiting.get(worker)?.get(m.asked)?.(m.generation)
    this.waiting.get(worker)?.delete(m.asked)
  }

  close(): Promise<unknown> {
    return Promise.all([this.source.close(), this.rlsLoads?.close()])
  }

  private post(m: ToWorker): void {
    for (const w of this.workers) w.postMessage(m)
  }

  private onReport(r: ReloadReport): void {
    let acks: Promise<(number | null)[]> = Promise.resolve([])
    if (r.result === 'applied') {
      // The new generation first: until every worker runs it, /readyz answers 503 in each, so the version a
      // 200 names is always the one fairvisor_config_info shows from now on.
      const generation = ++this.generation
      this.generations.supervisor = generation
      showConfig(this.metrics, this.source.bundles.current!)
      const accepted = this.source.bundles.accepted
      acks = Promise.all(
        [...this.workers].map((w) => {
          const wait = new Promise<number | null>((resolve) => {
            const mine = this.waiting.get(w) ?? new Map<number, (g: number | null) => void>()
            this.waiting.set(w, mine.set(generation, resolve))
          })
          w.postMessage({ type: 'bundle', bundle: accepted, generation } satisfies ToWorker)
          return wait
        }),
      )
    }
    const applied = r.result === 'applied' ? this.source.bundles.current : null
    const generation = this.generation
    this.reporting = this.reporting.then(async () => {
      const behind = (await acks).filter((g) => g !== null && g < generation).length
      if (behind > 0) this.log.warn({ behind, version: applied?.version }, 'some workers could not build the bundle the supervisor applied')
      logReload(this.log, this.metrics, r, applied)
    })
  }
}
