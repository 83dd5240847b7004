// The store contract on the in-process store (driven clock, exact figures).
import { MemoryStore } from '../../src/store/memory/store.js'
import type { Store } from '../../src/store/store.js'
import { runStoreContract } from './contract.js'

runStoreContract('memory', async () => new MemoryStore({ maxBytes: 16 * 1024 * 1024 }), {
  serverClock: false,
  prefix: 'mem',
  async keyExists(store: Store, key: string, now: number) {
    const m = store as MemoryStore
    m.sweep(now)
    return m.has(key)
  },
})
