// The store contract on the shared-memory store (driven clock, exact figures), as for the memory store.
import { SharedMemoryStore } from '../../src/store/threads/store.js'
import { SharedTable } from '../../src/store/threads/table.js'
import type { Store } from '../../src/store/store.js'
import { runStoreContract } from './contract.js'

runStoreContract('shared memory', async () => new SharedMemoryStore({ table: SharedTable.create(16 * 1024 * 1024) }), {
  serverClock: false,
  prefix: 'shm',
  async keyExists(store: Store, key: string, now: number) {
    const s = store as SharedMemoryStore
    s.table.sweep(now, s.table.buckets)
    return s.has(key, -Infinity) // present at all, expired or not: the sweep must have emptied it
  },
})
