/**
 * What a limit kind's Lua and PL/pgSQL twins must be: each runs the same
 * maths as the kind's TypeScript `step` / `adjust`, inside the server, on
 * the server's clock. The frames around them (store/redis/script.ts,
 * store/postgres/sql.ts) read the arguments, the stored state and the clock,
 * run the twin of each check's kind, and write back what it returns; a
 * twin only does the maths of one counter.
 *
 * **Lua** (`LimitKind.lua`): the body of a function run once as the script
 * starts, returning two functions:
 *
 *     step(v, p1, p2, p3, cost)    → allowed, value, retryAfter[, state, ttlMs[, commit]]
 *     adjust(v, p1, p2, p3, amount) → state, ttlMs   (nil: nothing to adjust)
 *
 * `v` is the stored string (false: none or expired); `state` the string to
 * store (struct.pack), kept `ttlMs` (PSETEX), needed when allowed or when
 * `commit` (a reject that is written anyway). In scope: `now` (server time
 * in µs), `nowS` (in seconds), `pack`, `unpack`, `floor`, `abs`, `ceil`,
 * `snap(x)` (EPSILON of a whole number → it), `ttlOf(ms)` (clamped to
 * [1 s, 1e13 ms], whole) and `secondsTo(t)` (whole seconds to `t`, at least 1).
 *
 * **PL/pgSQL** (`LimitKind.sql`): statements of the `take` and `adjust`
 * functions' loops, given the table prefix `p` (its functions: `<p>snap`).
 * The state is four float8 cells `a0..a3`, read as the stored row when
 * `here` (the row exists and has not expired). In `take`: inputs `p1 p2 p3
 * cost now here a0..a3`; set `ok` and `val`, `retry` (0 unless set) and,
 * when `ok` or when setting `keep` (commit on reject), the new state
 * `n0..n3` and its expiry `nx` (epoch seconds). In `adjust`: inputs `p1 p2
 * p3 amount now here a0..a3`, `ok` true unless set false (nothing to
 * adjust); when `ok`, set `n0..n3` and `nx`.
 */

/** A kind's PL/pgSQL twin: statements for the `take` and `adjust` loops of table prefix `p`. */
export interface KindSql {
  take(p: string): string
  adjust(p: string): string
}

/** A parameter's range in the differential test: `min` = `max` fixes it. */
export interface ParamRange {
  readonly min: number
  readonly max: number
  /** Whole numbers only. */
  readonly integer?: boolean
}

/**
 * A kind in the stores' differential test (test/property/stores-differential.test.ts):
 * limits are drawn from `params`; stores on their own clocks see one request a few
 * ms apart, so values may differ by `drift` per second of that skew, and outcomes
 * only for a request within that tolerance of the allow / reject `edge`.
 */
export interface KindSample<L> {
  readonly params: readonly ParamRange[]
  /** How much the value may move per second (refill, decay); 0: every store must agree to the epsilon. */
  drift(limit: L): number
  /** How far an outcome lies from the allow / reject boundary (consulted when `drift` > 0). */
  edge(limit: L, outcome: { allowed: boolean; value: number; retryAfter: number }, cost: number): number
}
