/**
 * The seam between the gateway (main.ts) and the process it runs in, so the
 * wiring is the same in a process of one thread as in one worker thread of
 * several: where its listeners listen, the tables the threads share, the
 * network data files, where /metrics text comes from, and where the bundle
 * comes from and how its reloads are fed in.
 *
 * one-thread.ts: one thread does all of it itself (its own sockets, tables,
 * files and bundle; SIGHUP reloads it). worker-thread.ts: one of several
 * worker threads, whose supervisor (workers/supervisor.ts, the main thread)
 * bound the sockets, made the shared tables, reads and watches the files and
 * the bundle for all, sums /metrics and takes the signals.
 */
import type { AddressInfo, Server } from 'node:net'
import type { CompiledBundle } from '../bundle/compile.js'
import type { RlsConfig } from '../grpc/rls-config.js'
import type { Named } from '../listeners.js'
import type { ProcessView, ThreadView } from '../observe/admin-view.js'
import type { Logger } from '../observe/logger.js'
import type { Metrics } from '../observe/metrics.js'
import type { NetworkFeed } from '../request/network-data.js'
import type { LogLevel, Settings } from '../settings.js'
import type { StoreWiring } from '../store/factory.js'
import { VERSION } from '../version.js'

/** The bundle and the RLS configuration in force, and how they came. */
export interface BundleFeed {
  /** null while none is in force. */
  bundle(): CompiledBundle | null
  /** FAIRVISOR_RLS_CONFIG's configuration, when set. */
  rls(): RlsConfig | undefined
  /** Every thread serving runs the bundle in force (/readyz is 503 otherwise); absent: one thread, always. */
  inSync?(): boolean
  /** Before anything serves: arm the watches, then read (one thread), or nothing (the supervisor did). */
  start(): Promise<void>
  close(): Promise<unknown>
}

/** What the "listening" line says, the same in every thread: where each listener listens, the mode, the backend, the store. */
export function listeningFields(
  settings: Pick<Settings, 'mode' | 'backendUrl'>,
  host: string,
  ports: Named<number>,
  store: string,
): Record<string, unknown> {
  const { mode, backendUrl } = settings
  return {
    mode,
    host,
    port: ports.main,
    adminPort: ports.admin,
    grpcPort: ports.grpc,
    backend: backendUrl?.origin,
    store,
    version: VERSION,
  }
}

/** Start-up says whether the admin API is on, and where (docs/admin.md): once per process. */
export function logAdminApi(log: Logger, settings: Pick<Settings, 'adminToken'>, adminPort: number | undefined): void {
  if (settings.adminToken === undefined)
    log.info({ adminApi: false }, 'admin API off: set FAIRVISOR_ADMIN_TOKEN (with FAIRVISOR_ADMIN_PORT) to serve /v1/admin/*')
  else log.info({ adminApi: true, adminPort }, `admin API on the admin listener, port ${adminPort}`)
}

/** The port of each listener listening. */
export function ports(at: Named<AddressInfo>): Named<number> {
  return { main: at.main?.port, admin: at.admin?.port, grpc: at.grpc?.port }
}

export interface Runtime {
  /** This gateway's logger (a worker's lines carry `worker`, its id). */
  logger(level: LogLevel): Logger
  /** The counter and lease tables the threads share, and this thread's id in them; undefined: this thread's own. */
  readonly tables: StoreWiring['shared']
  /** The network data files as the supervisor read them (and their changes); undefined: this thread reads them. */
  readonly net: NetworkFeed | undefined
  /** The gRPC byte budget every thread charges (grpc/byte-budget.ts) and this thread's account in it; undefined: its own. */
  readonly grpcBudget: { shared: SharedArrayBuffer; holder: number } | undefined
  /** The count of held requests every thread takes from (decision/hold-slots.ts) and this thread's account in it; undefined: its own. */
  readonly holdSlots: { shared: SharedArrayBuffer; holder: number } | undefined
  /** /metrics text over every thread; undefined: this gateway's own registry is the whole process. */
  readonly metricsText: (() => Promise<string>) | undefined
  /** The bundle feed (`log` and `metrics` report its reloads where this thread reads the bundle itself). */
  config(log: Logger, metrics: Metrics): BundleFeed
  /**
   * Every server listening on its named socket, in the order of listeners.ts; a listener that cannot listen
   * closes the ones before it and throws a SettingError naming its setting.
   */
  listen(servers: Named<Server>): Promise<Named<AddressInfo>>
  /** Start-up is done (`at`: where the listeners listen): say so, and take reload requests from now on (SIGHUPs held meanwhile make one now). */
  started(log: Logger, at: Named<AddressInfo>, store: string): void
  /** Shutdown begins: no more reload requests. */
  stopping(): void
  /**
   * What the admin API reads of the process, from this thread's part (`local`): with the reload
   * history in one thread; with worker threads every worker's part, merged by the supervisor.
   */
  processView(local: () => Promise<ThreadView>): () => Promise<ProcessView>
}
