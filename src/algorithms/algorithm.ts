/**
 * The algorithm seam. Two levels:
 *
 * - A **limit kind** is what a store applies: pure maths on one counter's
 *   state (`step`), the numbers a server script needs (`params`), and how the
 *   in-process store packs the state into its cells. Every store dispatches
 *   on `kind.id`: the memory store calls `step`, the Redis script has a
 *   branch per id (store/redis/script.ts) running the same maths.
 * - An **algorithm** is what a bundle names (`token_bucket`, …): it
 *   normalises its `algorithm_config` once at load into a Limit (kind and
 *   parameters), names its counter-key prefix and reject reason, and turns an
 *   outcome into the RateLimit-* header values.
 *
 * Adding an algorithm: a file here implementing both (or reusing a kind), a
 * line in ALGORITHMS (algorithms/index.ts), and for a new kind a branch in
 * the Redis script. Nothing here does I/O or reads a clock: time is passed in.
 */

/** A limit as a store sees it: its kind and the kind's parameters, fixed at bundle load. */
export interface Limit {
  readonly kind: LimitKind
  /** The kind's parameters in the order its server-script branch reads them (at most PARAMS). */
  readonly params: readonly number[]
}

/** Parameters per check in the server scripts' argument layout; unused ones are sent as 0. */
export const PARAMS = 3

/** What one step of a kind decided for one check. */
export interface Step<S> {
  allowed: boolean
  /** Kind-specific figure: tokens left (token bucket). Unchanged state's figure on a reject. */
  value: number
  /** Seconds until the cost would fit (0 when allowed). */
  retryAfter: number
  /** The new state, to be committed if the check's whole group passes. */
  state: S
  /** When forgetting this state is lossless (seconds, same clock as `now`). */
  expireAt: number
  /** On a reject: commit `state` anyway (a circuit breaker opening), whatever the group decides. */
  commit?: boolean
}

export interface LimitKind<L extends Limit = Limit, S = unknown> {
  /** The branch id in server scripts; never reused for another kind. */
  readonly id: number
  readonly name: string
  /** Pure: the state after charging `cost` at `now` (state undefined: never seen or expired). */
  step(state: S | undefined, limit: L, cost: number, now: number): Step<S>
  /**
   * Pure: give back (`amount` > 0) or charge on top (`amount` < 0) to a state
   * already charged; undefined when there is nothing to adjust (no state).
   */
  adjust(state: S | undefined, limit: L, amount: number, now: number): Step<S> | undefined
  /** In-process store packing: state ↔ up to CELLS doubles at `off`. */
  load(cells: Float64Array, off: number): S
  save(state: S, cells: Float64Array, off: number): void
}

/** Doubles per counter in the in-process store. */
export const CELLS = 4

/** Values for the RateLimit-* headers of one limit. */
export interface HeaderValues {
  /** RateLimit-Limit / the `q` of RateLimit-Policy. */
  limit: number
  remaining: number
  resetS: number
  /** The `w` of RateLimit-Policy. */
  windowS: number
}

/** Reasons a limit can reject with (X-Fairvisor-Reason). */
export type RejectReason =
  | 'token_bucket_exceeded' | 'budget_exceeded' | 'loop_detected' | 'circuit_breaker_open'
  | 'prompt_tokens_exceeded' | 'max_tokens_per_request_exceeded' | 'tpm_exceeded' | 'tpd_exceeded'

/** What an allowed limit asks of the response: a warning header, a delay (ms, 0: none). */
export interface Advice {
  warning: 'budget_warn' | 'budget_throttle' | 'loop_detected'
  delayMs: number
  /** A loop was detected (counted in fairvisor_loop_detected_total). */
  loop?: boolean
}

/** A bundle algorithm (docs/behaviour.md §5), compiled once per rule at load. */
export interface Algorithm<C extends Limit = Limit> {
  readonly name: string
  /** Counter keys are `<prefix><rule name>:<composite key>` (`shadow:` in front for shadow policies). */
  readonly keyPrefix: string
  /** Reason of a reject by this algorithm's limit. */
  readonly rejectReason: RejectReason
  /** The config that actually runs (aliases and defaults applied); input already schema-validated. */
  normalise(raw: Record<string, unknown>): C
  /**
   * Header values for an allowed (`rejected` false) or rejecting outcome of
   * this limit; undefined when the limit adds none (guards on allow).
   */
  headers(limit: C, value: number, retryAfter: number, rejected: boolean): HeaderValues | undefined
  /** Warn/throttle stages of an allowed outcome. */
  advise?(limit: C, value: number): Advice | undefined
  /** One line for `fairvisor test`: what the outcome's figure means. */
  describe?(limit: C, value: number): string
}
