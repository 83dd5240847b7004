/**
 * `fairvisor test` past the decision, on the file's clock and the run's store:
 * a request in debt (a token bucket's max_delay_ms) is held as the gateway
 * holds it — while FAIRVISOR_MAX_DELAYED earlier holds are still running it
 * is refused, its charges given back — and the response status a sample line
 * gives (`status`, default 200) settles the charges of rules with
 * count_statuses / refund_statuses, as the proxy does once it knows it.
 */
import type { Decision } from '../engine/decision.js'
import { refundAdjustments, refundsFor } from '../engine/status-charges.js'
import type { Store } from '../store/store.js'

/** A charge a response status settled: given back (`refunded`) or kept. */
export interface StatusSettlement {
  policy: string
  rule: string
  cost: number
  refunded: boolean
}

/** The holds running at each request, on the sample file's clock. */
export class SimulatedHolds {
  /** When each running hold ends (seconds after the start). */
  private ends: number[] = []

  constructor(private readonly max: number) {}

  /** `d` held from `at`, or its refusal (charges given back on `store`) while `max` holds run. */
  hold(d: Decision, at: number, store: Store, nowS: number): Decision {
    const debt = d.debt
    if (debt === undefined) return d
    this.ends = this.ends.filter((end) => end > at)
    if (this.ends.length >= this.max) {
      store.adjust(debt.charges, nowS, () => undefined)
      return debt.refused
    }
    this.ends.push(at + d.delayMs! / 1000)
    return d
  }
}

/** Settles an allowed decision's status charges on `status`; what each became, or undefined when it has none. */
export function settleStatus(d: Decision, status: number, store: Store, nowS: number): StatusSettlement[] | undefined {
  const charges = d.statusCharges
  if (!d.allowed || charges === undefined) return undefined
  const refunds = refundsFor(charges, status)
  if (refunds.length > 0) store.adjust(refundAdjustments(refunds), nowS, () => undefined)
  return charges.map((c) => ({ policy: c.policyId, rule: c.ruleName, cost: c.charge.amount, refunded: refunds.includes(c) }))
}

/** Table lines of the settlement. */
export function statusLines(status: number, rows: readonly StatusSettlement[] | undefined): string[] {
  return (rows ?? []).map(
    (r) => `    response ${status}: ${r.policy}/${r.rule} ${r.refunded ? `cost ${r.cost} given back` : `cost ${r.cost} kept`}`,
  )
}
