/**
 * The store the settings name, opened for one gateway: built by the factory
 * with the logs of its events, and connected before the gateway serves when
 * it is reachable. One that is not reachable at start-up is no reason to stay
 * down (the fail policy applies until it is); one that refuses the URL
 * (password, role, database) is a wrong setting that waiting would not fix
 * (exit 2).
 */
import { SettingError } from '../errors.js'
import { leaseTableFullLog, storeFullLog } from '../observe/engine-observer.js'
import type { Logger } from '../observe/logger.js'
import type { StoreConfig } from './config.js'
import { createStore, type StoreWiring } from './factory.js'
import type { Store } from './store.js'

export async function openStore(
  config: StoreConfig,
  w: { log: Logger; clock: () => number; shared: StoreWiring['shared'] },
): Promise<Store> {
  const { log, clock } = w
  const store = await createStore(config, {
    clock,
    log: (level, fields, msg) => log[level](fields, msg),
    onFull: storeFullLog(log, clock),
    onLeaseTableFull: leaseTableFullLog(log, clock),
    shared: w.shared,
  })
  const reachable = await store.ready(3000).catch(async (err: Error) => {
    await store.close()
    throw new SettingError('FAIRVISOR_STORE', `the ${store.kind} store refused the connection: ${err.message}`)
  })
  if (!reachable) log.warn({ store: store.kind }, 'store not reachable at start-up; the fail policy applies until it is')
  return store
}
