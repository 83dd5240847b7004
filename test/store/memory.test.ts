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
    // The index is private; the test peeks at it to see the sweep's effect on one key.
    return (m as unknown as { index: Map<string, number> }).index.has(key)
  },
})
