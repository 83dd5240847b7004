/**
 * A span per decision (docs/tracing.md): with tracing on, main.ts wraps the deciders so that a traced
 * request's decision is a span under its server span (HTTP or gRPC), carrying what was decided, and
 * its store call goes under it (the wrapped decider hands the engine the decision span's context).
 * With tracing off nothing is wrapped: the deciders are called as they are.
 */
import type { Decide, DecideLimits } from '../decision/decide.js'
import type { Decision } from '../engine/decision.js'
import type { Settlement } from '../llm/exchange.js'
import { ATTR, type Context, recording, type Span, SpanKind, spanOf, startSpan, tracer, under } from './tracing.js'

export interface DecisionSpanOptions {
  /** The store's kind (FAIRVISOR_STORE: memory, shared-memory, redis, postgres, …). */
  store: string
  /** This worker thread's id; undefined in a process of one thread. */
  worker: number | undefined
}

const NAME = 'fairvisor.decision'

/** allow, delay (allowed after a wait) or reject. */
export function actionOf(d: Decision): 'allow' | 'delay' | 'reject' {
  return !d.allowed ? 'reject' : d.delayMs === undefined ? 'allow' : 'delay'
}

/** What was decided, on the decision's span. */
export function decisionAttributes(span: Span, d: Decision): void {
  span.setAttribute(ATTR.action, actionOf(d))
  span.setAttribute(ATTR.reason, d.reason)
  span.setAttribute(ATTR.mode, d.mode)
  span.setAttribute(ATTR.failOpen, d.reason === 'store_unavailable_fail_open')
  if (d.policyId !== undefined) span.setAttribute(ATTR.policy, d.policyId)
  if (d.ruleName !== undefined) span.setAttribute(ATTR.rule, d.ruleName)
  if (d.delayMs !== undefined) span.setAttribute(ATTR.delayMs, d.delayMs)
  // Every LLM rule of a request reserves for the same call: the largest reservation is what the call may use.
  if (d.llm !== undefined && d.llm.length > 0) span.setAttribute(ATTR.tokensReserved, Math.max(...d.llm.map((r) => r.reserved)))
}

function start(parent: Context, o: DecisionSpanOptions): Span {
  const span = startSpan(NAME, SpanKind.INTERNAL, parent, { [ATTR.store]: o.store })
  if (o.worker !== undefined) span.setAttribute(ATTR.worker, o.worker)
  return span
}

/** `decide` with a decision span for each traced request (RequestInput.trace set), the others decided as they are. */
export function tracedDecide(decide: Decide, o: DecisionSpanOptions): Decide {
  return (input, collectDescriptors, then) => {
    const parent = input.trace
    // Not kept (sampled out): decided as it is, and its store call, under a span not kept, makes none either.
    if (parent === undefined || tracer === null || !recording(parent)) return decide(input, collectDescriptors, then)
    const span = start(parent, o)
    decide({ ...input, trace: under(parent, span) }, collectDescriptors, (d) => {
      decisionAttributes(span, d)
      span.end()
      then(d)
    })
  }
}

/** `decideLimits` (Rate Limit Service calls) with a decision span for each traced call. */
export function tracedDecideLimits(decideLimits: DecideLimits, o: DecisionSpanOptions): DecideLimits {
  return (target, limits, then, charge, trace) => {
    if (trace === undefined || tracer === null || !recording(trace)) return decideLimits(target, limits, then, charge, trace)
    const span = start(trace, o)
    decideLimits(
      target,
      limits,
      (d, outcomes, read) => {
        decisionAttributes(span, d)
        span.end()
        then(d, outcomes, read)
      },
      charge,
      under(trace, span),
    )
  }
}

/** An LLM call's settlement, on its request's server span (`ctx`): the tokens the call used, as settled. */
export function settledAttributes(ctx: Context, settled: readonly Settlement[]): void {
  if (settled.length === 0) return
  spanOf(ctx)?.setAttribute(ATTR.tokensSettled, Math.max(...settled.map((s) => s.used)))
}
