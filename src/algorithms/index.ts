/**
 * The algorithms a bundle rule may name, by name: the one place that lists
 * them. The bundle schema's algorithm enum and config branches, the validator
 * and the compiler all read this table (docs/architecture.md, "Adding an
 * algorithm"). A rule whose algorithm is not here is refused by the schema.
 */
import type { Limit, RejectReason, RuleAlgorithm } from './algorithm.js'
import { CONCURRENCY } from './concurrency.js'
import { COST_BUDGET } from './cost-budget.js'
import { LLM_DAY, LLM_MINUTE } from './llm.js'
import { SLIDING_WINDOW } from './sliding-window.js'
import { TOKEN_BUCKET } from './token-bucket.js'

const table = new Map<string, RuleAlgorithm>()
let revision = 0
/** The jitter bound of reasons whose algorithm sets one (RuleAlgorithm.retryJitterMaxS). */
const jitterBounds = new Map<string, number>()

/**
 * Adds an algorithm to the table (a second one of the same name replaces it).
 * Built-ins are registered below; a test registers a made-up one the same way.
 */
export function registerAlgorithm<C extends Limit>(algorithm: RuleAlgorithm<C>): void {
  table.set(algorithm.name, algorithm as RuleAlgorithm)
  if (algorithm.retryJitterMaxS !== undefined) jitterBounds.set(algorithm.rejectReason, algorithm.retryJitterMaxS)
  else jitterBounds.delete(algorithm.rejectReason)
  revision++
}

registerAlgorithm(TOKEN_BUCKET)
registerAlgorithm(COST_BUDGET)
// Its day counter is a second limit of the same rule (compile.ts, engine/llm-plan.ts), with a reason and jitter bound of its own.
registerAlgorithm(LLM_MINUTE)
jitterBounds.set(LLM_DAY.rejectReason, LLM_DAY.retryJitterMaxS!)
registerAlgorithm(SLIDING_WINDOW)
registerAlgorithm(CONCURRENCY)

/** Rule algorithms (loop detection and the circuit breaker are policy guards, compiled apart). */
export const ALGORITHMS: ReadonlyMap<string, RuleAlgorithm> = table

/** Changes whenever the table does: the compiled bundle schema is rebuilt then. */
export function algorithmsRevision(): number {
  return revision
}

/** The most Retry-After jitter may add to a reject of this reason (s; Algorithm.retryJitterMaxS), Infinity: half the wait. */
export function jitterMaxS(reason: RejectReason | string): number {
  return jitterBounds.get(reason) ?? Infinity
}
