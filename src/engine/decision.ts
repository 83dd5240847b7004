/**
 * What the engine hands back and reports: the Decision of one request, the
 * LLM reservations it carries for settlement, and the observer hooks.
 */
import type { Advice, Limit, RejectReason } from '../algorithms/algorithm.js'
import type { LlmConfig } from '../algorithms/llm.js'
import type { CompiledPolicy, CompiledRule } from '../bundle/compile.js'
import type { StatusRule } from '../bundle/status-patterns.js'
import type { TargetRefusal } from '../request/target.js'
import type { ModelPrice } from '../llm/prices.js'
import type { Adjustment } from '../store/store.js'
import type { LimitView } from './headers.js'

export type Reason =
  | 'no_bundle_loaded'
  | 'no_matching_policy'
  | 'all_rules_passed'
  | 'kill_switch'
  | 'service_unavailable'
  | 'store_unavailable_fail_open'
  | 'ambiguous_request'
  | TargetRefusal
  | 'store_full'
  | RejectReason

/**
 * One token_bucket_llm rule's charge on an allowed request: settled once the
 * response says what was used (engine/finish.ts). Both counters were charged
 * `reserved`; the settlement adjusts both by reserved − used.
 */
export interface LlmReservation {
  policyId: string
  ruleName: string
  shadow: boolean
  config: LlmConfig
  minute: { key: string; limit: Limit }
  day: { key: string; limit: Limit } | undefined
  /** Prompt tokens estimated before the call. */
  prompt: number
  /** Prompt estimate + completion reservation: the charge to each counter. */
  reserved: number
  /** Completions asked for (`n`, `best_of`; 1 by default): the stream is cut at this many times max_completion_tokens. */
  choices: number
  /** The rule's streaming is enabled: any text/event-stream answer is metered and cut, whatever the body asked. */
  streaming: boolean
}

/**
 * A money budget's charge on an allowed request (`"cost_key": "llm_price"`, engine/spend-plan.ts):
 * the price of the call's reservation, in micros of the currency, settled once the response says
 * what was used (llm/spend-settle.ts) by one adjustment of the budget's counter.
 */
export interface SpendReservation {
  policyId: string
  ruleName: string
  shadow: boolean
  /** The budget's counter, charged `reserved`. */
  key: string
  limit: Limit
  /** The model priced (llm:model; undefined: none could be read) and its price (micros per million tokens). */
  model: string | undefined
  price: ModelPrice
  currency: string
  /** Prompt tokens estimated, output tokens reserved. */
  prompt: number
  completion: number
  /** Micros charged before the call. */
  reserved: number
  /** The budget (micros): an overrun is charged at most this much. */
  budget: number
}

/**
 * Charges made ahead of time by an allowed request (`max_delay_ms`: a token
 * bucket's debt, a sliding window's count for the instant the request fits;
 * engine/debt.ts): the request is held `waitMs` until then, within
 * FAIRVISOR_MAX_DELAYED (decision/holds.ts).
 */
export interface Debt {
  waitMs: number
  /** What to give back when the request is not forwarded after all: its enforce charges but LLM reservations (their exchange gives those back). */
  charges: Adjustment[]
  /**
   * The same charges given back `elapsedMs` after the decision, when one of them depends on it (a
   * sliding window's held charge: the window it was counted for); absent: `charges` at any time.
   */
  chargesAfter?(elapsedMs: number): Adjustment[]
  /** The decision when it cannot be held: a reject by the limit in debt. */
  refused: Decision
  /** The policy of the limit in debt (metrics). */
  policyId: string
}

/** A charge of a rule with count_statuses / refund_statuses, settled on the response's status (engine/status-charges.ts). */
export interface StatusCharge {
  policyId: string
  ruleName: string
  shadow: boolean
  rule: StatusRule
  /** What giving it back adjusts: the check's key, limit and cost. */
  charge: Adjustment
}

/** A request held for its debt (decision/holds.ts): the front end forwards it when the wait is over, or says its client left. */
export interface HeldRequest {
  /** Runs `go` once the wait is over (at once when it is); never after abandon(). */
  then(go: () => void): void
  /** The client left before the request was forwarded: the request's charges are given back (once). */
  abandon(): void
}

/**
 * A slot an allowed request holds on a concurrency limit until its exchange
 * ends: the adjustment that gives it back — its key, limit, the slots taken
 * (`amount`, the rule's fixed_cost) and when (`at`, the decision's clock,
 * moved on by each renewal) — so http/slot-holds.ts hands it to the store as
 * it is, renewing it meanwhile.
 */
export interface HeldSlot extends Adjustment {
  policyId: string
  at: number
  /** Renewed while still held after this many seconds (a third of its lease). */
  renewS: number
}

export interface Decision {
  allowed: boolean
  /**
   * 200 allow, 400 ambiguous request or refused target (request/target.ts) or an LLM request too large for its
   * rule, 403 an LLM reject whose wait passes FAIRVISOR_LLM_MAX_RETRY_AFTER (engine/llm-reject.ts), 429 reject,
   * 503 no bundle / store down with fail-closed / no room for a new counter.
   */
  status: 200 | 400 | 403 | 429 | 503
  reason: Reason
  mode: 'enforce' | 'shadow'
  policyId?: string
  ruleName?: string
  /** Headers source: most restrictive enforce limit on allow, the rejecting one on reject. */
  limit?: LimitView
  /** Jittered Retry-After (rejects only). */
  retryAfterS?: number
  /** Counter key and cost of the limit the headers come from (debug log). */
  key?: string
  cost?: number
  /** X-Fairvisor-Warning of an allowed request (budget stage, loop). */
  warning?: Advice['warning']
  /** Hold the allowed request this long before forwarding it (budget throttle, loop throttle, a token bucket's debt). */
  delayMs?: number
  /** Set when part of the delay is a debt (engine/debt.ts); the decider then holds the request or refuses it. */
  debt?: Debt
  /** The hold of a request in debt, set by the decider (decision/holds.ts): front ends wait on it instead of a timer of their own. */
  hold?: HeldRequest
  matchedPolicies: readonly string[]
  /** What makes an `ambiguous_request` ambiguous, or an LLM reject's own words with its figures, for the client (names only what it sent). */
  message?: string
  /** The store's error when it failed (`store_unavailable_fail_open`, `service_unavailable`): for front ends that answer it, never for a client. */
  storeError?: string
  /** Descriptor key → value of the limits evaluated (debug sessions). */
  descriptors?: Map<string, string>
  /** Why the request's bearer token did not verify (debug sessions; request/jwt-verify.ts JwtRejectReason). */
  jwtRejected?: string
  /** LLM charges committed by this request, to settle after the response (enforce ones only when allowed). */
  llm?: LlmReservation[]
  /** Money budgets' charges committed by this request, settled after the response like `llm`. */
  spend?: SpendReservation[]
  /** Charges of rules with count_statuses / refund_statuses, to settle on the response's status (allowed requests only). */
  statusCharges?: StatusCharge[]
  /** Concurrency slots committed by this request, to give back when its exchange ends (enforce ones only when allowed). */
  held?: HeldSlot[]
}

export interface ShadowReject {
  policyId: string
  ruleName: string
  reason: Reason
  key: string
}

export interface PlannedLimit {
  policyId: string
  ruleName: string
  algorithm: string
  /** Full counter key, e.g. `tb:per_ip:10.0.0.1` (`shadow:` in front for shadow policies). */
  key: string
  composite: string
  cost: number
  shadow: boolean
}

/** Thin hooks so the hot path does not format logs or build label objects itself. */
export interface EngineObserver {
  descriptorMissing(key: string, policyId: string, ruleName: string): void
  shadowReject(r: ShadowReject): void
  storeError(err: Error): void
  /** A limit was planned for this request (`fairvisor test` shows it): rule selected, key complete, cost known. */
  limitPlanned?(l: PlannedLimit): void
  /**
   * An allowed request charged `cost` to an enforce limit of `policyId`, leaving the limit's figure `value` (metrics);
   * `settledLater`: what it consumes is known after the response (an LLM reservation, a charge a status settles).
   */
  limitCharged?(policyId: string, cost: number, value: number, settledLater: boolean): void
  /** A loop was detected (count ≥ threshold) on `policyId`, whatever its action. */
  loopDetected?(policyId: string, action: string): void
  /** Every breaker outcome: open (rejecting) or closed, per policy (gauge; a log line on each change). */
  breakerState?(policyId: string, open: boolean): void
  /** Each limit's outcome, in check order (`fairvisor test`). */
  outcome?(index: number, allowed: boolean, value: number, detail: string | undefined): void
  /** An LLM rule's prompt estimate and reservation, before any store call (`fairvisor test`). */
  llmEstimated?(policyId: string, ruleName: string, prompt: number, reserved: number): void
  /**
   * A limit rejected the key `composite` (its limit-key values as the counter key holds them), in an
   * enforce or a shadow policy, at `nowMs` (the admin API's top keys). Arguments, not an object: a
   * flood of rejects allocates nothing for it.
   */
  rejected?(policy: CompiledPolicy, rule: CompiledRule, reason: Reason, composite: string, nowMs: number): void
}
