/** The algorithms a bundle rule may name, by name. A rule whose algorithm is not here is skipped at load with a warning. */
import type { Algorithm } from './algorithm.js'
import { COST_BUDGET } from './cost-budget.js'
import { LLM_MINUTE } from './llm.js'
import { TOKEN_BUCKET } from './token-bucket.js'

/** Rule algorithms (loop detection and the circuit breaker are policy guards, compiled apart). */
export const ALGORITHMS: ReadonlyMap<string, Algorithm> = new Map<string, Algorithm>([
  [TOKEN_BUCKET.name, TOKEN_BUCKET as Algorithm],
  [COST_BUDGET.name, COST_BUDGET as Algorithm],
  // Its day counter is a second limit of the same rule (compile.ts, engine/llm-plan.ts).
  [LLM_MINUTE.name, LLM_MINUTE as Algorithm],
])
