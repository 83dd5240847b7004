/** Store-test helpers: token-bucket checks, apply() as a promise, health as /readyz computes it. */
import { bucketLimit } from '../../src/algorithms/kinds/token-bucket/kind.js'
import type { Check } from '../../src/store/store.js'

export { applyAsync } from '../../src/store/store.js'
export { storeHealth } from '../../src/http/health.js'

/** A token-bucket check. */
export const tbCheck = (key: string, burst: number, rate: number, cost = 1, shadow = false): Check => ({
  key,
  limit: bucketLimit(rate, burst),
  cost,
  shadow,
})
