/** The messages between the supervisor (main thread) and its worker threads. */
import type { MetricObjectWithValues, MetricValue } from 'prom-client'
import type { SharedNetworkBytes } from '../request/network-data.js'

export type MetricsJson = MetricObjectWithValues<MetricValue<string>>[]

export type ToWorker =
  | { type: 'reload' }
  | { type: 'collect'; id: number }
  | { type: 'metrics-text'; id: number; text?: string; error?: string }
  | { type: 'shutdown' }
  /** A network data file changed (the supervisor checked it): its new bytes. */
  | { type: 'network-data'; setting: string; bytes: SharedArrayBuffer }

export type FromWorker =
  | { type: 'ready'; port: number; adminPort: number | undefined }
  | { type: 'fatal'; setting: boolean; message: string }
  | { type: 'reloaded'; version: number | null }
  | { type: 'closing' }
  | { type: 'collected'; id: number; json: MetricsJson }
  | { type: 'metrics'; id: number }

/** What the supervisor hands a worker at start (workerData). */
export interface WorkerData {
  workerId: number
  table: SharedArrayBuffer | undefined
  leases: SharedArrayBuffer | undefined
  net: SharedNetworkBytes
  listenFd: number
  adminFd: number | undefined
  /** The gRPC listener's socket (FAIRVISOR_GRPC_PORT), served by every worker. */
  grpcFd: number | undefined
  /** The process's gRPC byte budget (grpc/byte-budget.ts), with FAIRVISOR_GRPC_PORT. */
  grpcBudget: SharedArrayBuffer | undefined
}
