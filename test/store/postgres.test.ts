// The store contract on the machine's PostgreSQL (shared: a table prefix unique
// to this run, dropped afterwards). keyExists runs the store's own clean-up
// first, so "gone" means the row was really deleted, not only expired.
import type { PostgresStore } from '../../src/store/postgres/store.js'
import type { Store } from '../../src/store/store.js'
import { runStoreContract } from './contract.js'
import { anyRow, dropPrefix, openStore, uniquePrefix } from '../helpers/postgres-db.js'

const prefix = uniquePrefix('ct')

runStoreContract('postgres', () => openStore(prefix), {
  serverClock: true,
  prefix: 'pg',
  async keyExists(store: Store, key: string) {
    await (store as PostgresStore).cleanup()
    return await anyRow(prefix, key)
  },
  cleanup: () => dropPrefix(prefix),
})
