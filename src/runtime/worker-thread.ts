/**
 * The runtime of one worker thread of several (FAIRVISOR_WORKERS > 1),
 * driven by its supervisor (workers/supervisor.ts) over the thread's port:
 * it listens where the supervisor says (workers/sockets.ts), counts on the
 * tables the supervisor made, runs the bundle and the data files the
 * supervisor read (a worker never reads those files), and asks the
 * supervisor for /metrics, which only it can sum over every worker.
 *
 * It takes the supervisor's messages from its construction, the thread's
 * first moment: a bundle the supervisor applies while the gateway starts is
 * built at once (the gateway starts on it); the other messages wait for the
 * gateway (serve()).
 */
import type { AddressInfo, Server } from 'node:net'
import { threadId, type MessagePort } from 'node:worker_threads'
import type { Registry } from 'prom-client'
import { listenAll, type Named } from '../listeners.js'
import { mergeViews, type ProcessView, type ThreadView } from '../observe/admin-view.js'
import { createLogger, type Logger } from '../observe/logger.js'
import type { NetworkFeed } from '../request/network-data.js'
import type { LogLevel, Settings } from '../settings.js'
import type { FromWorker, ToWorker, WorkerData } from '../workers/messages.js'
import { WorkerConfigFeed } from '../workers/worker-config.js'
import { listeningFields, ports, type Runtime } from './runtime.js'

/** What the thread needs of its gateway once it serves. */
export interface ServingGateway {
  address: AddressInfo
  adminAddress: AddressInfo | undefined
  metrics: { registry: Registry }
  shutdown(): Promise<void>
}

export class WorkerThread implements Runtime {
  readonly tables: Runtime['tables']
  readonly net: NetworkFeed
  readonly grpcBudget: Runtime['grpcBudget']
  readonly holdSlots: Runtime['holdSlots']
  private readonly feed: WorkerConfigFeed
  private gateway: ServingGateway | undefined
  /** Messages that came before the gateway served. */
  private readonly early: ToWorker[] = []
  /** /metrics texts asked of the supervisor, by request id. */
  private readonly asked = new Map<number, { resolve(text: string): void; reject(err: Error): void }>()
  private seq = 0
  /** Process views asked of the supervisor (admin API), by request id. */
  private readonly views = new Map<number, { resolve(view: ProcessView): void; reject(err: Error): void }>()
  /** This thread's part of the admin API's view, which the supervisor collects. */
  private localView: (() => Promise<ThreadView>) | undefined
  private readonly netChanged: ((setting: string, bytes: SharedArrayBuffer) => void)[] = []
  /** This thread's servers on the shared sockets: the supervisor hears "closing" once none listens any more. */
  private readonly servers: Server[] = []

  constructor(
    private readonly port: MessagePort,
    private readonly data: WorkerData,
    private readonly settings: Readonly<Settings>,
  ) {
    this.tables = { table: data.table, leases: data.leases, threadId }
    this.net = { bytes: data.net, subscribe: (fn) => void this.netChanged.push(fn) }
    this.grpcBudget = data.grpcBudget && { shared: data.grpcBudget, holder: data.workerId }
    this.holdSlots = { shared: data.holdSlots, holder: data.workerId }
    this.feed = new WorkerConfigFeed(data, { signingKey: settings.bundleSigningKey, mode: settings.mode }, this.send)
    port.on('message', (m: ToWorker) => {
      if (this.feed.onMessage(m)) return
      if (this.gateway === undefined) this.early.push(m)
      else this.handle(this.gateway, m)
    })
  }

  readonly send = (m: FromWorker): void => this.port.postMessage(m)

  logger(level: LogLevel): Logger {
    return createLogger(level).child({ worker: this.data.workerId })
  }

  /** /metrics of this worker's listener: the sum over every worker, which only the supervisor can make. */
  readonly metricsText = (): Promise<string> =>
    new Promise((resolve, reject) => {
      const id = ++this.seq
      this.asked.set(id, { resolve, reject })
      this.send({ type: 'metrics', id })
    })

  /** The admin API's view: every worker's part, merged by the supervisor, with its reload history. */
  processView(local: () => Promise<ThreadView>): () => Promise<ProcessView> {
    this.localView = local
    return () =>
      new Promise((resolve, reject) => {
        const id = ++this.seq
        this.views.set(id, { resolve, reject })
        this.send({ type: 'admin', id })
      })
  }

  config(): WorkerConfigFeed {
    return this.feed
  }

  listen(servers: Parameters<Runtime['listen']>[0]): ReturnType<Runtime['listen']> {
    for (const s of Object.values(servers)) if (s) this.servers.push(s)
    return listenAll(servers, (name) => this.data.listen[name]!, this.settings)
  }

  started(log: Logger, at: Named<AddressInfo>, store: string): void {
    log.info(listeningFields(this.settings, at.main!.address, ports(at), store), 'worker listening')
  }

  /** The supervisor's signals end the process; it tells this thread (a 'shutdown' message). */
  stopping(): void {}

  /** The gateway serves: the messages held meanwhile are handled, and the supervisor hears it is ready. */
  serve(gateway: ServingGateway): void {
    this.gateway = gateway
    for (const m of this.early.splice(0)) this.handle(gateway, m)
    this.send({ type: 'ready', port: gateway.address.port, adminPort: gateway.adminAddress?.port })
  }

  private handle(gateway: ServingGateway, m: ToWorker): void {
    switch (m.type) {
      case 'collect':
        void gateway.metrics.registry.getMetricsAsJSON().then((json) => this.send({ type: 'collected', id: m.id, json }))
        break
      case 'metrics-text': {
        const w = this.asked.get(m.id)
        this.asked.delete(m.id)
        if (m.text !== undefined) w?.resolve(m.text)
        else w?.reject(new Error(m.error ?? 'metrics unavailable'))
        break
      }
      case 'admin-collect': {
        // Always answered (an empty part if need be): the supervisor waits for every worker's.
        const part = this.localView?.().catch(() => undefined) ?? Promise.resolve(undefined)
        void part.then((view) => this.send({ type: 'admin-collected', id: m.id, view: view ?? mergeViews([]) }))
        break
      }
      case 'admin-view': {
        const w = this.views.get(m.id)
        this.views.delete(m.id)
        if (m.view !== undefined) w?.resolve(m.view)
        else w?.reject(new Error(m.error ?? 'admin view unavailable'))
        break
      }
      case 'network-data':
        for (const fn of this.netChanged) fn(m.setting, m.bytes)
        break
      case 'shutdown': {
        const done = gateway.shutdown()
        // The supervisor reports the drain once no worker accepts connections any more.
        const closed = (): void => void (this.servers.every((s) => !s.listening) ? this.send({ type: 'closing' }) : setImmediate(closed))
        closed()
        void done.finally(() => process.exit(0))
        break
      }
    }
  }
}
