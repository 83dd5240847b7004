/**
 * Builds the store a StoreConfig names: memory (in-process, or the table
 * worker threads share), Redis, Redis Cluster or PostgreSQL; a store on a
 * server sits behind the leasing wrapper (leases are opt-in per rule and only
 * make sense on a remote store). The Redis and PostgreSQL stores, and their
 * clients (ioredis, pg), are loaded only when named: a gateway on the
 * in-process store does not carry them (several MiB in every worker thread).
 */
import type { StoreConfig } from './config.js'
import { LeasingStore } from './leasing.js'
import { MemoryStore, type MemoryStoreOptions } from './memory/store.js'
import type { StoreLog } from './remote.js'
import { LeaseTable } from './threads/leases.js'
import { SharedMemoryStore } from './threads/store.js'
import { SharedTable } from './threads/table.js'
import type { Store } from './store.js'

export interface StoreWiring {
  clock: () => number
  log: StoreLog
  onFull: MemoryStoreOptions['onFull']
  /** A request on a leased limit found no cell in the lease table (decided exactly). */
  onLeaseTableFull?: () => void
  /** The worker threads' shared counter table and lease table (their memory), and this thread's id, when the gateway runs several. */
  shared?: { table: SharedArrayBuffer | undefined; leases: SharedArrayBuffer | undefined; threadId: number }
}

export async function createStore(config: StoreConfig, w: StoreWiring): Promise<Store> {
  switch (config.kind) {
    case 'memory':
      return w.shared?.table
        ? new SharedMemoryStore({ table: new SharedTable(w.shared.table, w.shared.threadId), clock: w.clock, onFull: w.onFull })
        : new MemoryStore({ maxBytes: config.maxBytes, clock: w.clock, onFull: w.onFull })
    case 'redis': {
      const { target, timeoutMs } = config
      const store =
        target.kind === 'cluster'
          ? new (await import('./redis/cluster.js')).RedisClusterStore({ target, timeoutMs, log: w.log })
          : new (await import('./redis/store.js')).RedisStore({ target, timeoutMs, log: w.log })
      return new LeasingStore(store, w.clock, leaseTable(w, config.leaseKeys), w.onLeaseTableFull)
    }
    case 'postgres': {
      const { target, timeoutMs, poolSize, prefix, unlogged } = config
      const { PostgresStore } = await import('./postgres/store.js')
      const store = new PostgresStore({ target, timeoutMs, poolSize, prefix, unlogged, log: w.log })
      return new LeasingStore(store, w.clock, leaseTable(w, config.leaseKeys), w.onLeaseTableFull)
    }
  }
}

/** With workers, the process's lease table (one slice per key per process, sized by the supervisor); else this thread's own of `keys` cells. */
const leaseTable = (w: StoreWiring, keys: number): LeaseTable =>
  w.shared?.leases ? new LeaseTable(w.shared.leases, w.shared.threadId) : LeaseTable.create(keys)
