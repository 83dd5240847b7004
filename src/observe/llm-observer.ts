/**
 * Settlement of LLM calls as metrics and log lines: tokens consumed (the
 * settled usage), reservations given back, the estimate's accuracy
 * (reported ÷ estimated prompt tokens), what each was settled on, dropped
 * settlements (store down: logged at most once a second), truncated streams
 * (with the tokens waited for a tool call to close, and whether it did)
 * and would_truncate (a stream over the limit that was not cut, with why:
 * a shadow policy, enforce_mid_stream off, or a client that did not ask
 * for a stream), and streams ended because the upstream broke them (an
 * event past FAIRVISOR_LLM_MAX_EVENT_BYTES, an unreadable one); money budgets' settlements:
 * the spend in micros of the currency, what each was settled on, overruns capped at the budget.
 */
import type { ExchangeHooks, Settlement } from '../llm/exchange.js'
import type { Store } from '../store/store.js'
import type { Logger } from './logger.js'
import type { Metrics } from './metrics.js'

export function llmHooks(log: Logger, metrics: Metrics, store: Store, clock: () => number): ExchangeHooks {
  let lastDropLog = 0
  let dropped = 0
  const settled = (list: Settlement[]): void => {
    for (const s of list) {
      const r = s.reservation
      metrics.tokenSettlements.inc({ by: s.by })
      if (!r.shadow) metrics.hot.tokensConsumed.inc(r.policyId, () => ({ policy: r.policyId }), s.used)
      if (!r.shadow && s.used < r.reserved) metrics.tokenReservationUnused.inc({ policy: r.policyId }, r.reserved - s.used)
      if (s.actualPrompt !== undefined && r.prompt > 0)
        metrics.tokenEstimationAccuracy.observe({ estimator: r.config.estimator }, s.actualPrompt / r.prompt)
      if (s.by === 'reserved')
        log.info(
          { event: 'llm_no_usage', policy: r.policyId, rule: r.ruleName, reserved: r.reserved },
          'LLM response carried no usage; the reservation is kept',
        )
    }
  }
  return {
    store,
    now: () => clock() / 1000,
    settled,
    dropped(err, list) {
      metrics.tokenSettlements.inc({ by: 'dropped' }, list.length)
      metrics.storeErrors.inc({ store: store.kind })
      dropped += list.length
      const now = clock()
      if (now - lastDropLog < 1000) return
      log.error(
        { event: 'llm_settlement_dropped', err: { message: err.message }, settlements: dropped },
        'store unavailable: LLM settlement dropped',
      )
      lastDropLog = now
      dropped = 0
    },
    wouldTruncate(r, counted, why) {
      log.info(
        {
          event: 'would_truncate',
          policy: r.policyId,
          rule: r.ruleName,
          completion_tokens: counted,
          max_completion_tokens: r.config.streaming.maxCompletion,
          why,
        },
        `stream passed max_completion_tokens; not cut (${why})`,
      )
    },
    overrunCapped: (c) =>
      log.warn(
        {
          event: 'llm_overrun_capped',
          policy: c.reservation.policyId,
          rule: c.reservation.ruleName,
          reported_tokens: c.reported,
          reserved: c.reservation.reserved,
          minute_charge: c.minuteCharge,
          day_charge: c.dayCharge,
        },
        'reported usage far above the reservation: overrun charge capped',
      ),
    broken(b) {
      metrics.llmStreamCuts.inc({ reason: b.why })
      const r = b.reservations[0]
      log.warn(
        {
          event: b.why === 'event_too_large' ? 'llm_event_too_large' : 'llm_stream_unreadable',
          policy: r?.policyId,
          rule: r?.ruleName,
          api: b.api,
          max_event_bytes: b.maxEventBytes,
          ...(b.err ? { err: { message: b.err.message } } : {}),
        },
        b.why === 'event_too_large'
          ? 'upstream stream event larger than FAIRVISOR_LLM_MAX_EVENT_BYTES: the stream was ended with an error event'
          : 'upstream stream could not be read: the stream was ended with an error event',
      )
    },
    spendSettled(list, err) {
      for (const s of list) {
        const r = s.reservation
        metrics.llmSpendSettlements.inc({ by: err ? 'dropped' : s.by })
        if (!err && !r.shadow && s.used > 0) metrics.llmSpend.inc({ policy: r.policyId, currency: r.currency }, s.used)
        if (s.capped)
          log.warn(
            {
              event: 'llm_spend_overrun_capped',
              policy: r.policyId,
              rule: r.ruleName,
              model: r.model,
              reserved_micros: r.reserved,
              budget_micros: r.budget,
              tokens: s.tokens,
            },
            'reported usage costs more than the whole budget: overrun charge capped at the budget',
          )
      }
    },
    truncated(r, counted, toolCall) {
      const unclosed = toolCall?.closed === false
      metrics.llmStreamCuts.inc({ reason: unclosed ? 'tool_call_unclosed' : 'max_completion_tokens' })
      log.info(
        {
          event: 'stream_truncated',
          policy: r.policyId,
          rule: r.ruleName,
          completion_tokens: counted,
          max_completion_tokens: r.config.streaming.maxCompletion,
          action: unclosed ? 'error_chunk' : r.config.streaming.onLimitExceeded,
          ...(toolCall ? { tool_call_grace_tokens: toolCall.grace, tool_call_closed: toolCall.closed } : {}),
        },
        unclosed
          ? 'stream ended at max_completion_tokens inside a tool call past its grace: error event'
          : toolCall
            ? 'stream ended at max_completion_tokens once its tool call closed'
            : 'stream ended at max_completion_tokens',
      )
    },
  }
}
