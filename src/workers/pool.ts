/**
 * The supervisor's worker threads: worker `id` (1..n) started on what the
 * supervisor hands it, replaced when it dies (its in-flight requests fail;
 * the tables, the sockets and the other workers go on), and drained on
 * shutdown. A worker that dies before it ever served fails the start.
 */
import { Worker } from 'node:worker_threads'
import type { Logger } from '../observe/logger.js'
import type { AdminGather } from './admin-gather.js'
import type { ConfigShare } from './config-share.js'
import type { FromWorker, ToWorker, WorkerData } from './messages.js'
import type { MetricsSum } from './metrics-sum.js'

export type Fatal = Extract<FromWorker, { type: 'fatal' }>

interface Slot {
  worker: Worker
  /** worker.threadId, kept: once the thread has stopped (before its 'exit' event) worker.threadId reads -1. */
  threadId: number
  ready: boolean
  /** Started and not exited: it takes messages (a starting worker applies them once it serves). */
  running: boolean
}

export interface PoolParts {
  entry: string
  /** The workers' environment (they read their settings from it). */
  env: NodeJS.ProcessEnv
  log: Logger
  config: ConfigShare
  sums: MetricsSum
  /** The admin API's view over every worker. */
  gather: AdminGather
  /** What worker `id` starting now is handed besides the bundle (its sockets, the tables, the data files). */
  handOut(id: number): Promise<Omit<WorkerData, keyof ReturnType<ConfigShare['forWorker']>>>
  /** Worker `id` (thread `threadId`) exited: free what it held for the others; how much was freed. */
  release(id: number, threadId: number): number
}

export class WorkerPool {
  private readonly slots: Slot[] = []
  private stopping = false
  private readonly restarted = new Map<number, () => void>()
  private readonly readyBefore = new Set<number>()
  private failed: (m: Fatal) => void = () => {}
  /** The first worker that could not start. */
  private readonly failure = new Promise<Fatal>((resolve) => (this.failed = resolve))

  constructor(private readonly o: PoolParts) {}

  /** Workers serving now. */
  live(): Worker[] {
    return this.slots.filter((s) => s?.ready).map((s) => s.worker)
  }

  /** Workers started and not exited, starting ones included. */
  running(): Worker[] {
    return this.slots.filter((s) => s?.running).map((s) => s.worker)
  }

  threadOf(id: number): number {
    return this.slots[id - 1]!.threadId
  }

  /** Start workers 1..n; resolves once all serve, or with the first that could not start. */
  async startAll(n: number): Promise<Fatal | undefined> {
    const started = Promise.all(Array.from({ length: n }, (_, i) => this.start(i + 1)))
    return Promise.race([started.then(() => undefined), this.failure])
  }

  /** End worker `id` abruptly, as a crash would; resolves once its replacement serves. */
  async kill(id: number): Promise<void> {
    const back = new Promise<void>((resolve) => this.restarted.set(id, resolve))
    await this.slots[id - 1]!.worker.terminate()
    await back
    this.restarted.delete(id)
  }

  /** Start failed: end every worker at once. */
  async terminate(): Promise<void> {
    this.stopping = true
    await Promise.all(this.slots.map((s) => s?.worker.terminate()))
  }

  /** Ask every worker to drain; resolves once none accepts connections any more, with all their exits. */
  async drain(): Promise<Promise<void>[]> {
    this.stopping = true
    const exited = this.slots.map((s) => new Promise<void>((resolve) => s.worker.once('exit', () => resolve())))
    await Promise.all(
      this.slots.map(
        (s) =>
          new Promise<void>((resolve) => {
            s.worker.once('exit', () => resolve())
            s.worker.on('message', (m: FromWorker) => m.type === 'closing' && resolve())
            s.worker.postMessage({ type: 'shutdown' } satisfies ToWorker)
          }),
      ),
    )
    return exited
  }

  private async start(id: number): Promise<void> {
    const { config, sums, gather, log } = this.o
    const data = await this.o.handOut(id)
    // The worker, its data and the bundle it starts on in one tick: what changes later is posted to it (config-share.ts).
    const worker = new Worker(this.o.entry, { workerData: { ...data, ...config.forWorker() } satisfies WorkerData, env: this.o.env })
    config.started(worker)
    const slot: Slot = { worker, threadId: worker.threadId, ready: false, running: true }
    this.slots[id - 1] = slot
    let readyNow: () => void = () => {}
    const ready = new Promise<void>((resolve) => (readyNow = resolve))
    worker.on('message', (m: FromWorker) => {
      if (m.type === 'ready') {
        slot.ready = true
        readyNow()
      } else if (m.type === 'fatal') this.failed(m)
      else if (m.type === 'reloaded') config.onReloaded(worker, id, m)
      else if (!sums.onMessage(worker, m)) gather.onMessage(worker, m)
    })
    worker.on('error', (err) => log.error({ worker: id, err: { message: err.message, stack: err.stack } }, 'worker failed'))
    worker.on('exit', (code) => {
      slot.ready = false
      slot.running = false
      config.exited(worker, id)
      sums.exited(worker)
      gather.exited(worker)
      const freed = this.o.release(id, slot.threadId)
      if (this.stopping) return
      if (!this.readyBefore.has(id))
        return this.failed({ type: 'fatal', setting: false, message: `worker ${id} exited with code ${code} while starting` })
      log.error({ worker: id, code, locksFreed: freed }, 'worker exited; starting a new one')
      // Paced, so a worker that dies at once does not spin the supervisor.
      setTimeout(
        () => void this.start(id).catch((err: Error) => log.error({ worker: id, err: { message: err.message } }, 'worker restart failed')),
        100,
      )
    })
    await ready
    this.readyBefore.add(id)
    this.restarted.get(id)?.()
  }
}
