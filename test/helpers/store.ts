/** Store-test helpers: token-bucket checks and health as the gateway computes it. */
import { bucketLimit } from '../../src/algorithms/token-bucket.js'
import { storeReady } from '../../src/http/health.js'
import type { Check, FailPolicy, Store } from '../../src/store/store.js'

export { applyAsync } from '../../src/store/store.js'

/** A token-bucket check. */
export const tbCheck = (key: string, burst: number, rate: number, cost = 1, shadow = false): Check => ({ key, limit: bucketLimit(rate, burst), cost, shadow })

/** The store's state and whether /readyz would report it ready under `failPolicy`. */
export function healthOf(store: Store, failPolicy: FailPolicy): { state: string; ready: boolean } {
  const state = store.state()
  return { state, ready: storeReady(state, failPolicy) }
}
