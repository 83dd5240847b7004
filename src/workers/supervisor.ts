/**
 * FAIRVISOR_WORKERS > 1: the main thread binds the listening sockets
 * (sockets.ts), creates what the workers share (the counter table with the
 * memory store, the lease table with Redis or PostgreSQL, the gRPC byte
 * budget, the network data files), and runs one gateway per worker thread on
 * them (pool.ts; each gateway's side of this is runtime/worker-thread.ts). It
 * alone reads and watches the bundle and hands it to every worker
 * (config-share.ts), sums /metrics (metrics-sum.ts), takes the signals, and
 * drains every worker on SIGTERM / SIGINT.
 */
import { fileURLToPath } from 'node:url'
import { SettingError } from '../errors.js'
// Not from main.js: the gateway's modules are the workers' to load, not this thread's (start-up time).
import { clock } from '../clock.js'
import { HoldSlots } from '../decision/hold-slots.js'
import { ByteBudget } from '../grpc/byte-budget.js'
import { createLogger, type Logger } from '../observe/logger.js'
import { createMetrics } from '../observe/metrics.js'
import { onReloadSignal } from '../reload-signal.js'
import type { Settings } from '../settings.js'
import { LeaseTable } from '../store/threads/leases.js'
import { SharedTable } from '../store/threads/table.js'
import { VERSION } from '../version.js'
import { listeningFields, logAdminApi } from '../runtime/runtime.js'
import { AdminGather } from './admin-gather.js'
import { ConfigShare } from './config-share.js'
import { MetricsSum } from './metrics-sum.js'
import { NetworkShare } from './network-share.js'
import { WorkerPool } from './pool.js'
import { Sockets } from './sockets.js'

const ENTRY = fileURLToPath(new URL('./worker.js', import.meta.url))

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
  /** The process's lease table (Redis, PostgreSQL). */
  leases: LeaseTable | undefined
  /** The thread id of worker `id` (1-based) now. */
  threadOf(id: number): number
  /** End worker `id` abruptly, as a crash would; resolves once its replacement serves. */
  kill(id: number): Promise<void>
  /** Drain every worker, then release the sockets. */
  stop(reason: string): Promise<void>
}

/** A start that failed: a setting to change prints one line and exits 2, as in a single thread; anything else exits 1. */
function refused(log: Logger, setting: boolean, message: string, what: string): number {
  if (setting) process.stderr.write(`fairvisor: invalid setting ${message}\n`)
  else log.fatal({ err: { message } }, what)
  return setting ? 2 : 1
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
  // Redis or PostgreSQL: one lease table for the process, so its workers hold one slice per hot key between them.
  const leases = settings.storeConfig.kind === 'memory' ? undefined : LeaseTable.create(settings.storeConfig.leaseKeys)
  // One gRPC byte budget for the process: a flood spread over the workers' connections meets the one bound.
  const grpcBudget = settings.grpcPort === undefined ? undefined : ByteBudget.shared(settings.workers)
  // One FAIRVISOR_MAX_DELAYED for the process, whichever worker holds the requests.
  const holdSlots = HoldSlots.shared(settings.workers)
  // Read and checked here, before anything binds: a bad file stops start-up (SettingError, exit 2).
  // Changes go to starting workers too: one whose start data predates a change would otherwise miss it.
  const net = new NetworkShare(settings, () => pool.running())
  let socks: Sockets
  try {
    socks = await Sockets.bind(settings)
  } catch (err) {
    await net.close()
    return refused(log, err instanceof SettingError, (err as Error).message, 'cannot bind the listening port')
  }
  // The bundle and the RLS configuration: read and watched here only, before any worker starts.
  const config = new ConfigShare(settings, log, metrics, clock)
  await config.start()
  // SIGHUPs held since the process began (reload-signal.ts) make one reload now; later ones reach starting workers too.
  const offHup = onReloadSignal(config.onHup)
  const fill = table && (() => table.fill())
  metrics.bindLiveState({ bundle: () => config.bundle(), nowMs: clock, storeFill: fill })
  const sums = new MetricsSum(metrics.registry, () => pool.live())
  const gather = new AdminGather(
    () => pool.live(),
    () => config.reloads(),
  )
  const pool: WorkerPool = new WorkerPool({
    entry: ENTRY,
    env,
    log,
    config,
    sums,
    gather,
    handOut: async (id) => {
      const listen = await socks.forWorker()
      // The data files' bytes after the wait, in the worker's tick: a change from then on is posted to it.
      return { workerId: id, table: table?.buffer, leases: leases?.buffer, grpcBudget, holdSlots, net: net.bytes(), listen }
    },
    release: (id, threadId) => {
      // A worker killed inside a critical section must not leave its buckets locked, nor its fetches pending, for the others;
      // nor the bytes its unfinished gRPC requests held charged to the budget, nor the slots of the requests it held.
      if (grpcBudget) ByteBudget.releaseOf(grpcBudget, id)
      HoldSlots.releaseOf(holdSlots, id)
      return (table?.releaseLocksOf(threadId) ?? 0) + (leases?.releaseOf(threadId) ?? 0)
    },
  })

  const failed = await pool.startAll(settings.workers)
  if (failed !== undefined) {
    offHup()
    await Promise.all([pool.terminate(), config.close()])
    socks.close()
    await net.close()
    return refused(log, failed.setting, failed.message, 'a worker could not start')
  }
  socks.settled()
  await net.watch(log)
  const [port, adminPort] = [socks.port('main')!, socks.port('admin')]
  const fields = listeningFields(
    settings,
    settings.host,
    { main: port, admin: adminPort, grpc: socks.port('grpc') },
    settings.storeConfig.kind,
  )
  log.info({ ...fields, workers: settings.workers }, `fairvisor listening on ${settings.host}:${port}`)
  logAdminApi(log, settings, adminPort)

  return {
    port,
    adminPort,
    table,
    leases,
    threadOf: (id) => pool.threadOf(id),
    kill: (id) => pool.kill(id),
    async stop(signal) {
      offHup()
      // This thread's hold on the ports first (its descriptors on Node 20): once the workers close theirs, the port refuses connections.
      socks.close()
      const exited = await pool.drain()
      log.info({ signal, timeoutMs: settings.shutdownTimeoutMs }, 'shutting down: draining in-flight requests in every worker')
      // A worker whose drain outlives the deadline (plus its own forced close) is ended, so the process always exits.
      const deadline = setTimeout(() => {
        log.warn({ timeoutMs: settings.shutdownTimeoutMs }, 'a worker did not finish draining; ending it')
        void pool.terminate()
      }, settings.shutdownTimeoutMs + 5000)
      await Promise.all([config.close(), net.close(), ...exited])
      clearTimeout(deadline)
      log.info('shutdown complete')
    },
  }
}
