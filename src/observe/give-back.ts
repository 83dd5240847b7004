/**
 * Charges given back after the decision — those of a request held for its
 * debt that was not forwarded (decision/holds.ts), those a response's status
 * does not keep (engine/status-charges.ts) — each as one store adjust, and
 * their metrics. A store failure drops the give-back: the
 * charge stays (the safe side), the store error is counted and logged at
 * most once a second.
 */
import type { HoldHooks } from '../decision/holds.js'
import { refundAdjustments, refundsFor, type SettleStatus } from '../engine/status-charges.js'
import type { Adjustment, Store } from '../store/store.js'
import { LogThrottle } from './log-throttle.js'
import type { Logger } from './logger.js'
import type { Metrics } from './metrics.js'

export type GiveBack = (charges: readonly Adjustment[]) => void

export function giveBackHook(log: Logger, metrics: Metrics, store: Store, clock: () => number): GiveBack {
  const throttle = new LogThrottle(clock)
  const failed = (err: Error | null): void => {
    if (err === null) return
    metrics.storeErrors.inc({ store: store.kind })
    const n = throttle.hit()
    if (n > 0)
      log.error({ event: 'give_back_dropped', err: { message: err.message }, count: n }, 'store unavailable: charges not given back')
  }
  return (charges) => {
    if (charges.length > 0) store.adjust(charges, clock() / 1000, failed)
  }
}

export function holdHooks(metrics: Metrics, giveBack: GiveBack): HoldHooks {
  return {
    giveBack,
    held: (policy, waitMs) => metrics.delaySeconds.observe({ policy }, waitMs / 1000),
    ended: (policy, result) => metrics.delayed.inc({ policy, result }),
  }
}

/**
 * After the response: gives back, in one store adjust, the charges its status does not keep, and
 * counts them per policy; the charges it keeps are the tokens consumed (not counted at the decision).
 */
export function settleByStatus(metrics: Metrics, giveBack: GiveBack): SettleStatus {
  return (charges, status) => {
    const refunds = refundsFor(charges, status)
    for (const c of charges) {
      const policy = c.policyId
      if (refunds.includes(c)) metrics.statusRefunds.inc({ policy })
      else if (!c.shadow) metrics.hot.tokensConsumed.inc(policy, () => ({ policy }), c.charge.amount)
    }
    if (refunds.length > 0) giveBack(refundAdjustments(refunds))
  }
}
