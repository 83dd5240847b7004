/** What a worker thread's gateway gets from its supervisor (supervisor.ts, worker.ts) on top of the settings. */
import type { AddressInfo, Server } from 'node:net'
import type { CompiledBundle } from '../bundle/compile.js'
import type { RlsConfig } from '../grpc/rls-config.js'
import type { NetworkFeed } from '../request/network-data.js'

export interface ThreadContext {
  /** 1-based, stable across restarts of the same worker; logged as `worker`. */
  workerId: number
  /** The shared counter table (memory store), made by the supervisor. */
  table: SharedArrayBuffer | undefined
  /** The process's lease table (shared stores), made by the supervisor. */
  leases: SharedArrayBuffer | undefined
  /** This worker's descriptor of the listening socket (and of the admin one). */
  /** The network data files, read and watched by the supervisor. */
  net: NetworkFeed
  listenFd: number
  adminFd: number | undefined
  grpcFd: number | undefined
  /** The gRPC byte budget every worker charges, made by the supervisor. */
  grpcBudget: SharedArrayBuffer | undefined
  /** /metrics summed over all workers, from the supervisor. */
  metricsText(): Promise<string>
  /** The bundle and RLS configuration the supervisor applied (worker-config.ts): a worker never reads those files. */
  config: WorkerConfig
}

export interface WorkerConfig {
  /** The supervisor's bundle as this thread built it; null while the supervisor has none. */
  bundle(): CompiledBundle | null
  /** The supervisor's RLS configuration (FAIRVISOR_RLS_CONFIG). */
  rls(): RlsConfig | undefined
  /** Every running worker runs the supervisor's bundle (/readyz is 503 otherwise). */
  inSync(): boolean
}

/** This thread's servers listening on a shared socket (worker.ts tells the supervisor once none accepts any more). */
export const sharedListeners: Server[] = []

/** Serve `server` on an already bound socket's descriptor. */
export function listenOnFd(server: Server, fd: number): Promise<AddressInfo> {
  sharedListeners.push(server)
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen({ fd }, () => {
      server.off('error', reject)
      resolve(server.address() as AddressInfo)
    })
  })
}
