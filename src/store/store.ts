/**
 * The store seam. Every limit of one request goes to the store in one call;
 * within a group (enforce, shadow) either every check passes and is committed
 * or nothing of that group is committed (docs/behaviour.md §4 step 6, no half-spend).
 * Being over a limit is a result; only a broken backend passes an error.
 * Each check names its limit kind (algorithms/algorithm.ts), on which every
 * store dispatches.
 */
import type { Limit } from '../algorithms/algorithm.js'

export interface Check {
  /** Full counter key, e.g. `tb:per_user:alice` or `shadow:tb:per_user:alice`. */
  key: string
  /** Kind and parameters, compiled once per rule. */
  limit: Limit
  cost: number
  /** Shadow checks form their own all-or-nothing group and never affect enforce checks. */
  shadow: boolean
  /** What this check's group charges it when the group rejects (OnReject); honoured only by a call given `reads`. */
  onReject?: OnReject
}

/**
 * When its group rejects, a check carrying one is read back into the call's `reads` (a step
 * of cost 0 on its counter: figure and whether within its limit), within the same store call:
 * `read` charges it nothing; `charge` its cost first, whatever its limit (envoyproxy/ratelimit's
 * default: every descriptor of a rejected call is counted); `over` its cost first when, alone on
 * its counter as the call found it, its cost would be rejected (STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT).
 * Charges are the kind's `adjust` by -cost, in check order, after the call's commits; a charged
 * check is read after all the group's charges, the others as the call found their counters.
 */
export type OnReject = 'read' | 'charge' | 'over'

export interface Outcome {
  allowed: boolean
  /** The kind's figure after the check (token bucket: tokens left, as if committed; unchanged when rejected). */
  value: number
  /** Seconds until the cost would fit (0 when allowed). */
  retryAfter: number
  /**
   * Refused because the bounded in-process store had no room for this key's
   * counter without dropping another key's live state (not over the limit:
   * the engine answers 503 store_full).
   */
  full?: boolean
}

/** One slot per check; `undefined` for a check not evaluated because an earlier one of its group rejected. */
export type Outcomes = Array<Outcome | undefined>

/** Called once with the outcomes, or with the store's error (a StoreError). */
export type ApplyDone = (err: Error | null, outcomes?: Outcomes) => void

/** A change to a counter already charged: `amount` > 0 gives back, < 0 charges more (LLM settlement, cluster refunds). */
export interface Adjustment {
  key: string
  limit: Limit
  amount: number
}

/** `connecting`: no usable connection; `degraded`: connected but the last call failed; `ok`. */
export type StoreState = 'ok' | 'degraded' | 'connecting'

/** What a store failure means for a request (FAIRVISOR_FAIL_POLICY). */
export type FailPolicy = 'open' | 'closed'

/** A bounded in-process store's fill, read by the scrape-time store gauges (observe/metrics.ts). */
export interface StoreFill {
  /** Checks refused because the store had no room for a new counter without dropping a live one. */
  full: number
  /** Bytes charged against the bound. */
  bytesUsed: number
  maxBytes: number
}

export interface Store {
  readonly kind: string
  /**
   * Apply the checks in order; `done` runs once, synchronously for the
   * in-process store (so its hot path has no promise), later for the others.
   * Per group, evaluation stops at the first reject: checks after it get no
   * outcome (`undefined`). `now` is in seconds; stores with a server clock ignore it.
   * With `reads`, the checks' `onReject` is honoured (before `done` runs, `reads[i]` holds check
   * i's read-back when its group rejected); a store that cannot (a Redis Cluster call over
   * several slots) ignores it, as apply() without `reads` does, and leaves `reads` empty.
   */
  apply(checks: readonly Check[], now: number, done: ApplyDone, reads?: Outcomes): void
  /**
   * apply() of a store that answers at once and never fails (the in-process ones): the engine
   * calls it directly, which spares the hot path a callback per request.
   */
  applyNow?(checks: readonly Check[], now: number, reads?: Outcomes): Outcomes
  /** Apply adjustments (each on its own; a missing counter is skipped). */
  adjust(adjustments: readonly Adjustment[], now: number, done: (err: Error | null) => void): void
  state(): StoreState
  /** A bounded in-process store's fill and checks refused for want of room (metrics); absent for remote stores. */
  fill?(): StoreFill
  /** The leasing layer in front of a remote store: checks decided exactly because the lease table had no cell for their key (metrics). */
  leaseTableFull?(): number
  /**
   * The admin API (docs/admin.md): forget the counters of `keys`, so that the next check of each starts
   * afresh. In-process stores drop them from the table (with worker threads, the one every worker
   * counts on); remote stores delete them on the server. `done` runs once, with the store's error if
   * it failed. Absent: the store cannot.
   */
  reset?(keys: readonly string[], done: (err: Error | null) => void): void
  /**
   * The admin API, in-process stores: `check`'s counter as it stands at `now`, read without charging it
   * or writing anything (a step of cost 0 on its state; `check.cost` is ignored). Remote stores have
   * none: a check of cost 0 reads theirs.
   */
  peek?(check: Check, now: number): Outcome
  /** A store that deletes expired rows itself (PostgreSQL): clean-ups that failed (metrics); undefined for the others. */
  cleanupErrors?(): number | undefined
  /** Resolves true once the store can serve, false after `timeoutMs`; rejects with the reason when the server refuses the URL (credentials, database). */
  ready(timeoutMs: number): Promise<boolean>
  close(): Promise<void>
}

/** apply() as a promise (tests, `fairvisor test`); the hot path uses the callback. */
export function applyAsync(store: Store, checks: readonly Check[], now: number): Promise<Outcomes> {
  return new Promise((resolve, reject) => store.apply(checks, now, (err, out) => (err ? reject(err) : resolve(out!))))
}
