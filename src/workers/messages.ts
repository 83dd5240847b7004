/** The messages between the supervisor (main thread) and its worker threads. */
import type { MetricObjectWithValues, MetricValue } from 'prom-client'
import type { AcceptedBundle } from '../bundle/source.js'
import type { RlsConfig } from '../grpc/rls-config.js'
import type { ProcessView, ThreadView } from '../observe/admin-view.js'
import type { ListenOn, Named } from '../listeners.js'
import type { SharedNetworkBytes } from '../request/network-data.js'

export type MetricsJson = MetricObjectWithValues<MetricValue<string>>[]

export type ToWorker =
  /** The supervisor applied a bundle (generation: see generations.ts); undefined while it has none. */
  | { type: 'bundle'; bundle: AcceptedBundle | undefined; generation: number }
  /** The supervisor loaded the RLS configuration (FAIRVISOR_RLS_CONFIG). */
  | { type: 'rls'; config: RlsConfig }
  | { type: 'collect'; id: number }
  | { type: 'metrics-text'; id: number; text?: string; error?: string }
  | { type: 'shutdown' }
  /** A network data file changed (the supervisor checked it): its new bytes. */
  | { type: 'network-data'; setting: string; bytes: SharedArrayBuffer }
  /** The admin API (admin-gather.ts): the supervisor asks each worker for its part, and answers the worker that asked with the whole. */
  | { type: 'admin-collect'; id: number }
  | { type: 'admin-view'; id: number; view?: ProcessView; error?: string }

export type FromWorker =
  | { type: 'ready'; port: number; adminPort: number | undefined }
  | { type: 'fatal'; setting: boolean; message: string }
  /** The bundle generation this worker runs now, after the one `asked` for (error: why it could not build that one). */
  | { type: 'reloaded'; asked: number; generation: number; error?: string }
  | { type: 'closing' }
  | { type: 'collected'; id: number; json: MetricsJson }
  | { type: 'metrics'; id: number }
  | { type: 'admin'; id: number }
  | { type: 'admin-collected'; id: number; view: ThreadView }

/** What the supervisor hands a worker at start (workerData). */
export interface WorkerData {
  /** 1-based, stable across restarts of the same worker; logged as `worker`. */
  workerId: number
  /** The shared counter table (memory store). */
  table: SharedArrayBuffer | undefined
  /** The process's lease table (Redis, PostgreSQL). */
  leases: SharedArrayBuffer | undefined
  /** The network data files, read and watched by the supervisor (network-share.ts). */
  net: SharedNetworkBytes
  /**
   * Where each listener the settings ask for listens in this worker (sockets.ts): its own descriptor of the socket
   * the supervisor bound, or (Node ≥ 22.12) the address and port the supervisor bound, shared with SO_REUSEPORT.
   */
  listen: Named<ListenOn>
  /** The process's gRPC byte budget (grpc/byte-budget.ts), with FAIRVISOR_GRPC_PORT. */
  grpcBudget: SharedArrayBuffer | undefined
  /** The process's count of requests held for their debt (decision/hold-slots.ts), against FAIRVISOR_MAX_DELAYED. */
  holdSlots: SharedArrayBuffer
  /** The supervisor's bundle and its generation when this worker started (its later ones come as 'bundle' messages). */
  bundle: AcceptedBundle | undefined
  generation: number
  /** The table of generations.ts. */
  generations: SharedArrayBuffer
  /** The supervisor's RLS configuration, with FAIRVISOR_RLS_CONFIG. */
  rls: RlsConfig | undefined
}
