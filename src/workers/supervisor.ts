/**
 * FAIRVISOR_WORKERS > 1: the main thread binds the listening sockets,
 * creates what the workers share (the counter table with the memory store,
 * the lease table with a shared store, the network data files), and runs
 * one gateway per worker thread on them. It restarts a worker that dies (its
 * in-flight requests fail; the tables, the socket and the other workers go
 * on), alone reads and watches the bundle and hands it to every worker
 * (config-share.ts), and drains them all on SIGTERM / SIGINT. /metrics:
 * metrics-sum.ts.
 */
import { fileURLToPath } from 'node:url'
import { Worker } from 'node:worker_threads'
import { SettingError } from '../errors.js'
// Not from main.js: the gateway's modules are the workers' to load, not this thread's (start-up time).
import { clock } from '../clock.js'
import { createLogger } from '../observe/logger.js'
import { createMetrics } from '../observe/metrics.js'
import { onReloadSignal } from '../reload-signal.js'
import type { Settings } from '../settings.js'
import { ByteBudget } from '../grpc/byte-budget.js'
import { LeaseTable } from '../store/shared/leases.js'
import { SharedTable } from '../store/shared/table.js'
import { VERSION } from '../version.js'
import { ConfigShare } from './config-share.js'
import { Sockets } from './sockets.js'
import type { FromWorker, ToWorker, WorkerData } from './messages.js'
import { MetricsSum } from './metrics-sum.js'
import { NetworkShare } from './network-share.js'

const ENTRY = fileURLToPath(new URL('./worker.js', import.meta.url))

interface Slot {
  id: number
  worker: Worker
  /** worker.threadId, kept: once the thread has stopped (before its 'exit' event) worker.threadId reads -1. */
  threadId: number
  ready: boolean
  /** Started and not exited: it takes messages (a starting worker applies them once it serves). */
  running: boolean
}

/** Runs until SIGTERM / SIGINT; resolves with the process exit code. */
export async function runSupervisor(settings: Readonly<Settings>): Promise<number> {
  // Listened for before start-up: a SIGTERM right after the "listening" line still drains (not the default kill).
  const signal = new Promise<string>((resolve) => {
    process.once('SIGTERM', () => resolve('SIGTERM'))
    process.once('SIGINT', () => resolve('SIGINT'))
  })
  const sup = await startSupervisor(settings)
  if (typeof sup === 'number') return sup
  await sup.stop(await signal)
  return 0
}

export interface Supervisor {
  port: number
  adminPort: number | undefined
  table: SharedTable | undefined
  /** The process's lease table (shared stores). */
  leases: LeaseTable | undefined
  /** The thread id of worker `id` (1-based) now. */
  threadOf(id: number): number
  /** End worker `id` abruptly, as a crash would; resolves once its replacement serves. */
  kill(id: number): Promise<void>
  /** Drain every worker, then release the sockets. */
  stop(reason: string): Promise<void>
}

/**
 * Bind, start the workers and serve; resolves once every worker listens, or
 * with an exit code when start-up failed. `env`: the workers' environment
 * (they read their settings from it, as the single-thread process does).
 */
export async function startSupervisor(settings: Readonly<Settings>, env: NodeJS.ProcessEnv = process.env): Promise<Supervisor | number> {
  const log = createLogger(settings.logLevel).child({ worker: 0 })
  const metrics = createMetrics()
  metrics.buildInfo.set({ version: VERSION }, 1)
  const table = settings.storeConfig.kind === 'memory' ? SharedTable.create(settings.sharedTableBytes) : undefined
  // A shared store: one lease table for the process, so its workers hold one slice per hot key between them.
  const leases = settings.storeConfig.kind === 'memory' ? undefined : LeaseTable.create(settings.storeConfig.leaseKeys)
  // One gRPC byte budget for the process: a flood spread over the workers' connections meets the one bound.
  const grpcBudget = settings.grpcPort === undefined ? undefined : ByteBudget.shared(settings.workers)
  const slots: Slot[] = []
  const live = (): Slot[] => slots.filter((s) => s.ready)
  // Read and checked here, before anything binds: a bad file stops start-up (SettingError, exit 2).
  // Changes go to starting workers too: one whose start data predates a change would otherwise miss it.
  const net = new NetworkShare(settings, () => slots.filter((s) => s?.running).map((s) => s.worker))
  const separateAdmin = settings.adminPort !== undefined // in both modes
  let socks: Sockets
  try {
    socks = Sockets.bind(settings, separateAdmin)
  } catch (err) {
    await net.close()
    // A port that cannot be bound is a setting to change, as in a single thread (exit 2, one line).
    if (err instanceof SettingError) {
      process.stderr.write(`fairvisor: invalid setting ${err.message}\n`)
      return 2
    }
    log.fatal({ err: { message: (err as Error).message } }, 'cannot bind the listening port')
    return 1
  }
  // The bundle and the RLS configuration: read and watched here only, before any worker starts.
  const config = new ConfigShare(settings, log, metrics, clock)
  await config.start()
  // SIGHUPs held since the process began (reload-signal.ts) make one reload now; later ones reach starting workers too.
  const offHup = onReloadSignal(config.onHup)
  const fill = table && (() => table.fill())
  metrics.bindLiveState({ bundle: () => config.bundles.current, nowMs: clock, storeFill: fill })
  let stopping = false
  const sums = new MetricsSum(metrics.registry, () => live().map((s) => s.worker))
  const restarted = new Map<number, () => void>()
  const readyBefore = new Set<number>()
  let failed: (m: Extract<FromWorker, { type: 'fatal' }>) => void = () => {}
  const failure = new Promise<Extract<FromWorker, { type: 'fatal' }>>((resolve) => (failed = resolve))

  const post = (w: Worker, m: ToWorker): void => w.postMessage(m)

  async function start(id: number): Promise<void> {
    const fds = await socks.dup()
    const data: Omit<WorkerData, keyof ReturnType<ConfigShare['forWorker']>> = {
      workerId: id,
      table: table?.buffer,
      leases: leases?.buffer,
      grpcBudget,
      net: net.bytes(),
      ...fds,
    }
    // The worker and the bundle it starts on in one tick: a bundle applied later is posted to it (config-share.ts).
    const worker = new Worker(ENTRY, { workerData: { ...data, ...config.forWorker() } satisfies WorkerData, env })
    config.started(worker)
    const slot: Slot = { id, worker, threadId: worker.threadId, ready: false, running: true }
    slots[id - 1] = slot
    let readyNow: () => void = () => {}
    const ready = new Promise<void>((resolve) => (readyNow = resolve))
    worker.on('message', (m: FromWorker) => {
      if (m.type === 'ready') {
        slot.ready = true
        readyNow()
      } else if (m.type === 'fatal') failed(m)
      else if (m.type === 'reloaded') config.onReloaded(worker, id, m)
      else sums.onMessage(worker, m)
    })
    worker.on('error', (err) => log.error({ worker: id, err: { message: err.message, stack: err.stack } }, 'worker failed'))
    worker.on('exit', (code) => {
      slot.ready = false
      slot.running = false
      config.exited(worker, id)
      sums.exited(worker)
      // A worker killed inside a critical section must not leave its buckets locked, nor its fetches pending, for the others.
      const freed = (table?.releaseLocksOf(slot.threadId) ?? 0) + (leases?.releaseOf(slot.threadId) ?? 0)
      // Nor the bytes its unfinished gRPC requests held charged to the budget.
      if (grpcBudget) ByteBudget.releaseOf(grpcBudget, id)
      if (stopping) return
      if (!slot.ready && !readyBefore.has(id))
        return failed({ type: 'fatal', setting: false, message: `worker ${id} exited with code ${code} while starting` })
      log.error({ worker: id, code, locksFreed: freed }, 'worker exited; starting a new one')
      // Paced, so a worker that dies at once does not spin the supervisor.
      setTimeout(
        () => void start(id).catch((err: Error) => log.error({ worker: id, err: { message: err.message } }, 'worker restart failed')),
        100,
      )
    })
    await ready
    readyBefore.add(id)
    restarted.get(id)?.()
  }

  const started = Promise.all(Array.from({ length: settings.workers }, (_, i) => start(i + 1)))
  const first = await Promise.race([started.then(() => undefined), failure])
  if (first !== undefined) {
    stopping = true
    offHup()
    await config.close()
    await Promise.all(slots.map((s) => s?.worker.terminate()))
    socks.close()
    await net.close()
    if (first.setting) process.stderr.write(`fairvisor: invalid setting ${first.message}\n`)
    else log.fatal({ err: { message: first.message } }, 'a worker could not start')
    return first.setting ? 2 : 1
  }
  await net.watch(log)
  log.info(
    {
      mode: settings.mode,
      host: settings.host,
      port: socks.main.port,
      adminPort: socks.admin?.port,
      grpcPort: socks.grpc?.port,
      backend: settings.backendUrl?.origin,
      store: settings.storeConfig.kind,
      workers: settings.workers,
      version: VERSION,
    },
    `fairvisor listening on ${settings.host}:${socks.main.port}`,
  )

  return {
    port: socks.main.port,
    adminPort: socks.admin?.port,
    table,
    leases,
    threadOf: (id) => slots[id - 1]!.threadId,
    async kill(id) {
      const back = new Promise<void>((resolve) => restarted.set(id, resolve))
      await slots[id - 1]!.worker.terminate()
      await back
      restarted.delete(id)
    },
    async stop(signal) {
      stopping = true
      offHup()
      // This thread's descriptors first: once the workers close theirs, the port refuses connections.
      socks.close()
      const exited = slots.map((s) => new Promise<void>((resolve) => s.worker.once('exit', () => resolve())))
      await Promise.all(
        slots.map(
          (s) =>
            new Promise<void>((resolve) => {
              s.worker.once('exit', () => resolve())
              s.worker.on('message', (m: FromWorker) => m.type === 'closing' && resolve())
              post(s.worker, { type: 'shutdown' })
            }),
        ),
      )
      log.info({ signal, timeoutMs: settings.shutdownTimeoutMs }, 'shutting down: draining in-flight requests in every worker')
      // A worker whose drain outlives the deadline (plus its own forced close) is ended, so the process always exits.
      const deadline = setTimeout(() => {
        log.warn({ timeoutMs: settings.shutdownTimeoutMs }, 'a worker did not finish draining; ending it')
        for (const s of slots) void s.worker.terminate()
      }, settings.shutdownTimeoutMs + 5000)
      await Promise.all([config.close(), net.close(), ...exited])
      clearTimeout(deadline)
      log.info('shutdown complete')
    },
  }
}
