/**
 * The counters of a rejected Rate Limit Service call read back (Engine.evaluateLimits): from the
 * store's own read-backs (store.ts OnReject, one store call), or, from a store that cannot make
 * them (a Redis Cluster call over several slots), by further calls: a charge and reads at cost 0.
 */
import type { Check, Outcome, Outcomes, Store } from '../store/store.js'

/**
 * What a group with a reject charges before its counters are read: nothing (false), every check
 * (true), or the checks `overAlone` picks from their counters read first (index in the call, the
 * read outcome), which are then read again. The stores pick those going over themselves (OnReject
 * `over`); the function decides only where they cannot, and must agree with them.
 */
export type ChargeRejected = boolean | ((index: number, read: Outcome) => boolean)

/** Groups (enforce, shadow) with a check not allowed: `outcomes` are per group cut at the first. */
function rejectedGroups(checks: readonly Check[], outcomes: Outcomes): boolean[] | undefined {
  const rejected = [false, false]
  for (let i = 0; i < checks.length; i++) if (outcomes[i]?.allowed !== true) rejected[+checks[i]!.shadow] = true
  return rejected[0] || rejected[1] ? rejected : undefined
}

/**
 * The outcomes of a call whose store read back its rejected groups: each such check's outcome
 * replaced by its read (marked true); undefined when no group rejected; false when the store
 * made no read-backs (nothing replaced: readRejected makes them).
 */
export function readBacks(checks: readonly Check[], outcomes: Outcomes, reads: Outcomes): boolean[] | undefined | false {
  const rejected = rejectedGroups(checks, outcomes)
  if (rejected === undefined) return undefined
  for (let i = 0; i < checks.length; i++) if (rejected[+checks[i]!.shadow] && reads[i] === undefined) return false
  const marks = checks.map(() => false)
  for (let i = 0; i < checks.length; i++) {
    if (!rejected[+checks[i]!.shadow]) continue
    outcomes[i] = reads[i]
    marks[i] = true
  }
  return marks
}

function apply(store: Store, checks: readonly Check[], nowMs: number, done: (err: Error | null, o?: Outcomes) => void): void {
  if (store.applyNow !== undefined) done(null, store.applyNow(checks, nowMs / 1000))
  else store.apply(checks, nowMs / 1000, done)
}

/** Reads the counters of the checks in a group with a reject, charging them first or after as `charge` says. */
export function readRejected(
  store: Store,
  checks: readonly Check[],
  outcomes: Outcomes,
  nowMs: number,
  charge: ChargeRejected,
  done: (read?: boolean[]) => void,
): void {
  const rejected = rejectedGroups(checks, outcomes)
  if (rejected === undefined) return done()
  const at: number[] = []
  for (let i = 0; i < checks.length; i++) if (rejected[+checks[i]!.shadow]) at.push(i)
  const marks = checks.map(() => false)
  // A read over its limit stops its group as any check does: the rest are read in another call.
  const read = (left: number[], then: () => void): void => {
    if (left.length === 0) return then()
    apply(
      store,
      left.map((i) => ({ key: checks[i]!.key, limit: checks[i]!.limit, cost: 0, shadow: checks[i]!.shadow })),
      nowMs,
      (err, got) => {
        // A failed read decides nothing (the decision is made): the outcomes stay those of the call.
        if (err) return done(marks)
        const next: number[] = []
        for (let j = 0; j < left.length; j++) {
          const o = got![j]
          if (o === undefined) next.push(left[j]!)
          else {
            outcomes[left[j]!] = o
            marks[left[j]!] = true
          }
        }
        read(next, then)
      },
    )
  }
  // A failed charge leaves the counters as the reads (if any) found them.
  const charged = (these: number[], then: () => void): void =>
    store.adjust(
      these.map((i) => ({ key: checks[i]!.key, limit: checks[i]!.limit, amount: -checks[i]!.cost })),
      nowMs / 1000,
      (err) => (err ? done(marks.includes(true) ? marks : undefined) : then()),
    )
  const finished = () => done(marks)
  if (charge === false) return read(at, finished)
  if (charge === true) return charged(at, () => read(at, finished))
  read(at, () => {
    const over = at.filter((i) => marks[i] && charge(i, outcomes[i]!))
    if (over.length === 0) return finished()
    charged(over, () => read(over, finished))
  })
}
