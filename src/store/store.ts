/**
 * The store seam. Every limit of one request goes to the store in one call;
 * within a group (enforce, shadow) either every check passes and is committed
 * or nothing of that group is committed (SPEC §4 step 6, no half-spend).
 * Being over a limit is a result; only a broken backend throws StoreError.
 */
export interface Check {
  /** Full counter key, e.g. `tb:per_user:alice` or `shadow:tb:per_user:alice`. */
  key: string
  rate: number
  burst: number
  cost: number
  /** Shadow checks form their own all-or-nothing group and never affect enforce checks. */
  shadow: boolean
}

export interface Outcome {
  allowed: boolean
  /** Tokens left after the check (as if committed; unchanged when rejected). */
  tokens: number
  /** Seconds until the cost would fit (0 when allowed). */
  retryAfter: number
}

/** One slot per check; `undefined` for a check not evaluated because an earlier one of its group rejected. */
export type Outcomes = Array<Outcome | undefined>

export interface StoreHealth {
  /** `ok`, `degraded` (failing, fail policy applies), … */
  state: string
  ready: boolean
}

/** Called once with the outcomes, or with the StoreError. */
export type ApplyDone = (err: Error | null, outcomes?: Outcomes) => void

export interface Store {
  readonly kind: string
  /**
   * Apply the checks in order. Per group, evaluation stops at the first
   * reject: the returned array holds an outcome for each check evaluated
   * (checks after a reject in the same group get no outcome, `undefined`).
   * `now` is in seconds; stores with a server clock may ignore it.
   * Synchronous stores return the array directly to spare the hot path a promise.
   */
  apply(checks: readonly Check[], now: number): Outcomes | Promise<Outcomes>
  /**
   * apply() with a callback, for stores that answer later: the engine's hot
   * path then needs no promise. Optional; the engine uses it when present.
   */
  applyThen?(checks: readonly Check[], now: number, done: ApplyDone): void
  health(): StoreHealth
  close(): Promise<void>
}
