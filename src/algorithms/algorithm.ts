/**
 * The algorithm seam. Two levels:
 *
 * - A **limit kind** is what a store applies: pure maths on one counter's state (`step`), the numbers a server
 *   script needs (`params`), how the in-process stores pack the state into their cells, and the same maths in Lua
 *   and PL/pgSQL. Each kind is one folder, algorithms/kinds/<kind>/ (kind.ts, redis.ts, postgres.ts), and one line
 *   in the kind table (algorithms/kinds/index.ts), from which the Redis script and the PostgreSQL functions are
 *   assembled. Every store dispatches on `kind.id`.
 * - An **algorithm** is what a bundle names (`token_bucket`, …): it normalises its `algorithm_config` once at load
 *   into a Limit (kind and parameters), names its counter-key prefix and reject reason, and turns an outcome into
 *   the RateLimit-* header values.
 *
 * Adding an algorithm: a file here and a line in ALGORITHMS (algorithms/index.ts); on a new kind, also the kind's
 * folder and its line in the kind table. Nothing here does I/O or reads a clock: time is passed in.
 */
import type { GatewayMode } from '../bundle/types.js'
import type { KindSample, KindSql } from './kinds/twins.js'

/** A limit as a store sees it: its kind and the kind's parameters, fixed at bundle load. */
export interface Limit {
  readonly kind: LimitKind
  /** The kind's parameters in the order its server-script branch reads them (at most PARAMS). */
  readonly params: readonly number[]
  /** Local leases of this limit in front of a remote store (store/leasing.ts); absent: every check is a store call. */
  readonly lease?: LeaseDescription
}

/**
 * Local leases of a limit (store/leasing.ts): an instance takes `tokens` at
 * once (one check of that cost) and spends them locally for at most `ttlMs`,
 * giving the unspent part back with an adjustment of the same limit. For a
 * kind whose value is what is left of a pool that checks draw from and whose
 * adjust gives a charge back (the token bucket).
 */
export interface LeaseDescription {
  /** The slice taken from the shared limit in one call. */
  readonly tokens: number
  /** How long a slice may be spent locally (ms). */
  readonly ttlMs: number
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

/** What stepCells tells of a check (the stores' Outcome has these fields). */
export interface CellsOutcome {
  allowed: boolean
  value: number
  retryAfter: number
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
   * `at`: when the charge being adjusted was made (the adjustment's own, else
   * `now`), for a kind whose state is kept by time of charge (concurrency).
   */
  adjust(state: S | undefined, limit: L, amount: number, now: number, at?: number): Step<S> | undefined
  /**
   * Optional, for a kind that writes nothing on a reject: `step` on the in-process stores' packed
   * cells in place (`live` false: they hold no state), no objects. Outcome into `out`; returns the
   * new expireAt when allowed (cells written), NaN when rejected (cells untouched).
   */
  stepCells?(cells: Float64Array, off: number, live: boolean, limit: L, cost: number, now: number, out: CellsOutcome): number
  /** Optional: `adjust` of a live packed state in place: its new expireAt, NaN when there is nothing to adjust (cells untouched). */
  adjustCells?(cells: Float64Array, off: number, limit: L, amount: number, now: number, at?: number): number
  /** In-process store packing: state ↔ up to CELLS doubles at `off`. */
  load(cells: Float64Array, off: number): S
  save(state: S, cells: Float64Array, off: number): void
  /** The limit of these parameters (a limit read back from numbers: a lease given back, a test drawing limits). */
  limit(params: readonly number[]): L
  /**
   * The limit that gives back a step's charge (an adjustment of its cost) `elapsedS` after the
   * step, for a kind whose charge lands by the step's outcome (a sliding window's held request,
   * counted for the window it is forwarded in); absent, or undefined: the check's own limit.
   */
  giveBack?(limit: L, outcome: { value: number; retryAfter: number }, elapsedS: number): L | undefined
  /** `step` and `adjust` in Lua, assembled into the Redis scripts (the contract: kinds/twins.ts). */
  readonly lua: string
  /** `step` and `adjust` in PL/pgSQL, assembled into the PostgreSQL functions (the contract: kinds/twins.ts). */
  readonly sql: KindSql
  /** What the stores' differential test draws for this kind, and how far stores on other clocks may differ. */
  readonly sample: KindSample<L>
}

/**
 * Float tolerance of every kind's maths: counts within EPSILON of a whole
 * number snap to it, waits subtract it before rounding up, limits allow it on
 * top. The Lua and PL/pgSQL twins (algorithms/kinds/<kind>/) and their frames
 * (store/redis/script.ts, store/postgres/sql.ts) interpolate this constant, so
 * the three copies cannot disagree on it.
 */
export const EPSILON = 1e-9

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

/**
 * The reasons limits reject with (X-Fairvisor-Reason), one key per reason.
 * Empty here: each algorithm's file declares its own by augmenting this
 * interface (`declare module './algorithm.js' { interface RejectReasons { … } }`),
 * so the union below grows with the algorithms and lists no names itself.
 */
export interface RejectReasons {}

/** Reasons a limit can reject with: the keys every algorithm declared in RejectReasons. */
export type RejectReason = keyof RejectReasons

/** What an allowed limit asks of the response: a warning header, a delay (ms, 0: none). */
export interface Advice {
  /** X-Fairvisor-Warning (undefined: none). */
  warning?: 'budget_warn' | 'budget_throttle' | 'loop_detected'
  delayMs: number
  /** A loop was detected (counted in fairvisor_loop_detected_total). */
  loop?: boolean
  /**
   * The delay is the wait for tokens charged ahead of time (a token bucket's
   * debt, `max_delay_ms`): such a hold counts against FAIRVISOR_MAX_DELAYED,
   * and a request that is not forwarded gives its charges back.
   */
  debt?: boolean
}

/**
 * What the engine sees of a limit (docs/behaviour.md §5): its counter-key
 * prefix, reject reason and headers. A rule algorithm (below) is one; so is
 * a second limit of the same rule (the LLM day counter).
 */
export interface Algorithm<C extends Limit = Limit> {
  readonly name: string
  /** Counter keys are `<prefix><rule name>:<composite key>` (`shadow:` in front for shadow policies). */
  readonly keyPrefix: string
  /** Reason of a reject by this algorithm's limit. */
  readonly rejectReason: RejectReason
  /**
   * Header values for an allowed (`rejected` false) or rejecting outcome of
   * this limit; undefined when the limit adds none (guards on allow).
   */
  headers(limit: C, value: number, retryAfter: number, rejected: boolean): HeaderValues | undefined
  /**
   * Warn/throttle stages of an allowed outcome, or the wait of one in debt (`debt: true`). `retryAfter`
   * is the allowed outcome's own (a kind whose wait does not follow from its value alone returns it there).
   */
  advise?(limit: C, value: number, retryAfter: number): Advice | undefined
  /** One line for `fairvisor test`: what the outcome's figure means. */
  describe?(limit: C, value: number): string | undefined
  /**
   * The most Retry-After jitter adds to its rejects' wait (s); default: half
   * the wait. Jitter is only ever added (engine/jitter.ts): a client told to
   * come back before its request could pass fails again. Limits that end at a
   * fixed instant (a budget period) bound it, so a month's wait does not grow
   * by two weeks.
   */
  readonly retryJitterMaxS?: number
  /**
   * For a limit whose charge is a slot the request holds while in flight
   * (concurrency): the seconds after which a slot still held is renewed (a
   * third of its lease, so a live request outlives the lease); the front end
   * gives the slot back when the exchange ends (http/slot-holds.ts).
   * Undefined, or absent: the charge is kept.
   */
  holdRenewS?(limit: C): number | undefined
}

/**
 * Where a bundle's decisions are used, for the checks that depend on it (the
 * gateway's FAIRVISOR_MODE and gRPC listener; `fairvisor validate --mode
 * --grpc`): only a reverse proxy, which forwards each request itself, sees
 * an exchange end.
 */
export interface BundleUse {
  /** FAIRVISOR_MODE. */
  readonly mode: GatewayMode
  /** FAIRVISOR_GRPC_PORT is set: ext_authz and the Rate Limit Service decide on the bundle too, and see no request end. */
  readonly grpc: boolean
}

/** A problem of one rule's algorithm_config found by `check` (field: path inside the config, '' for the config itself). */
export interface ConfigIssue {
  field: string
  message: string
  /** The bundle loads anyway (a limit that can never be reached, …). */
  warning?: boolean
}

/**
 * A bundle algorithm: what a rule names in `algorithm`, compiled once per
 * rule at load. It owns its whole contract: the schema of its
 * algorithm_config, the checks a schema cannot express, where the cost comes
 * from, the most one request may spend, and (as an Algorithm) its reject
 * reason and headers. A line in ALGORITHMS (algorithms/index.ts) puts it in
 * the bundle schema's enum and branches, the validator and the compiler.
 */
export interface RuleAlgorithm<C extends Limit = Limit> extends Algorithm<C> {
  /**
   * JSON Schema (draft 2020-12) of its algorithm_config. It may `$ref` the
   * bundle schema's shared definitions (`#/$defs/positive`, `#/$defs/costSource`, …).
   */
  readonly configSchema: object
  /** The config field holding `fixed`, `header:<name>` or `query:<name>` (undefined: every request costs fixed_cost, default 1). */
  readonly costField?: string
  /** Checks of a schema-valid config that JSON Schema cannot express (`use`: where the bundle's decisions are used). */
  check?(config: Record<string, unknown>, out: ConfigIssue[], use: BundleUse): void
  /** The config that actually runs (aliases and defaults applied); input already schema-validated. */
  normalise(raw: Record<string, unknown>): C
  /** The most one request can spend on this limit (a larger cost is always rejected); Infinity when undefined. */
  capacity?(limit: C): number
  /**
   * A part of the counter key, after the rule name, that depends on the limit:
   * a parameter the stored state is laid out by (concurrency: its lease
   * buckets), so that a reload changing it starts a counter of its own.
   */
  counterKeyPart?(limit: C): string
  /** An LLM rule: the proxy reads the body first and the engine plans it with engine/llm-plan.ts. */
  readonly llm?: boolean
  /** Name of the outcome's figure in `fairvisor test --json` output, when it has a documented one. */
  readonly testFigure?: 'tokens_left'
}
