/**
 * One LLM call after the decision: reads the response as it passes (a
 * stream's events are passed on whole, as each ends), cuts an over-long
 * stream (never in a tool call's arguments), ends a stream the upstream broke
 * (an event past the bound, an unreadable one) with the API's error event, and settles the request's
 * reservations once (llm/settlement.ts) — one store.adjust for all its
 * counters — so they end at what was really used. A store failure drops the
 * settlement (logged, counted) and never holds the response.
 */
import type { Context } from '@opentelemetry/api'
import type { LlmReservation, SpendReservation } from '../engine/decision.js'
import { settledAttributes } from '../observe/decision-spans.js'
import type { Adjustment, Store } from '../store/store.js'
import { completionHistory } from './completion-history.js'
import { closingEvents, TOOL_CALL_CUT_MESSAGE, upstreamErrorEvent } from './dialects/index.js'
import { streamFraming } from './framings/index.js'
import { settleAdjustments, type OverrunCapped } from './settle-cap.js'
import { completionLimits, deltaCounter, useOf, type SettledBy } from './settlement.js'
import { settleSpends, type SpendSettlement } from './spend-settle.js'
import { DEFAULT_MAX_EVENT_BYTES, DEFAULT_TOOL_CALL_GRACE_TOKENS, SseMeter } from './sse-meter.js'
import { collectUsage, usageFromTail, type Usage } from './usage.js'

/** JSON bodies up to this size are parsed whole; of larger ones only the tail is searched for usage. */
const JSON_KEEP = 1024 * 1024
const TAIL_KEEP = 64 * 1024

/**
 * Why the gateway ends a stream: an enforcing limit's max_completion_tokens
 * passed (`tool_call_unclosed`: in a tool call, past its grace); an event
 * longer than FAIRVISOR_LLM_MAX_EVENT_BYTES; one it failed to read.
 */
export type StreamEnd = 'max_completion_tokens' | 'tool_call_unclosed' | 'event_too_large' | 'unreadable'

/** What is told of a stream the upstream broke. */
export interface BrokenStream {
  why: 'event_too_large' | 'unreadable'
  reservations: readonly LlmReservation[]
  maxEventBytes: number
  /** The API the stream speaks, when known. */
  api: string | undefined
  err?: Error
}

export interface Settlement {
  reservation: LlmReservation
  /** Tokens the call used as settled (prompt + completion). */
  used: number
  /** Reported prompt tokens (undefined: not reported). */
  actualPrompt: number | undefined
  by: SettledBy
}

export interface ExchangeHooks {
  store: Store
  /** Epoch seconds. */
  now(): number
  settled(s: Settlement[]): void
  /** The store could not take the settlement (it is dropped). */
  dropped(err: Error, s: Settlement[]): void
  /** Passed max_completion_tokens, not cut: `why` is `shadow`, `enforce_mid_stream_off` or `not_streaming` (the client did not ask for a stream). */
  wouldTruncate(r: LlmReservation, counted: number, why: string): void
  truncated(r: LlmReservation, counted: number, toolCall?: { grace: number; closed: boolean }): void
  /** An overrun charge was capped (settle-cap.ts). */
  overrunCapped?(c: OverrunCapped): void
  /** A stream ended with the API's error event because the upstream broke it. */
  broken?(b: BrokenStream): void
  /** Money budgets settled (`err`: the store could not take the settlement, it is dropped). */
  spendSettled?(s: SpendSettlement[], err: Error | undefined): void
}

export class LlmExchange {
  private meter: SseMeter | undefined
  private json: Buffer[] | undefined
  private jsonBytes = 0
  private tail = ''
  private status = 0
  private finished = false
  /** The reservation that cut the stream, if one did. */
  private cutBy: LlmReservation | undefined
  /** The stream's reader threw: the stream ends here. */
  private failed: Error | undefined
  /** The gateway added stream_options.include_usage to the request: the usage chunk is not the client's. */
  private hideUsage = false

  constructor(
    private readonly reservations: readonly LlmReservation[],
    private readonly hooks: ExchangeHooks,
    /** FAIRVISOR_LLM_MAX_EVENT_BYTES. */
    private readonly maxEventBytes = DEFAULT_MAX_EVENT_BYTES,
    /** Money budgets' reservations: settled on the same usage, in the same store adjust (spend-settle.ts). */
    private readonly spend: readonly SpendReservation[] = [],
    private readonly toolCallGrace = DEFAULT_TOOL_CALL_GRACE_TOKENS, // FAIRVISOR_LLM_TOOL_CALL_GRACE_TOKENS
    /** A traced request's server span context: the settlement is written on it (observe/decision-spans.ts). */
    private readonly trace?: Context,
  ) {}

  /** The reservation whose limit cuts the stream (the first that may); only its graceful_close waits for a tool call. */
  private cutter = (): LlmReservation | undefined =>
    this.reservations.find((x) => x.streaming && !x.shadow && x.config.streaming.enforceMidStream)

  /** The request was sent with stream_options.include_usage the client did not ask for (llm/stream-usage.ts). */
  hideUsageChunk(): void {
    this.hideUsage = true
  }

  /**
   * The response head (`contentEncoding`: of the bytes `data` will get, the
   * relay decodes gzip/deflate/br/zstd first). SSE is metered, JSON kept
   * (bounded) for its usage. True when the response may be cut, so its
   * length is not known in advance.
   */
  headers(status: number, contentType: string | undefined, contentEncoding: string | undefined, path = ''): boolean {
    this.status = status
    if (contentEncoding !== undefined && contentEncoding !== 'identity') return false // an unknown coding: usage unreadable
    const framing = streamFraming(status, contentType, path) // not SSE: Bedrock, Ollama, Gemini's JSON array
    if (framing !== undefined || contentType?.includes('text/event-stream')) {
      const grace = this.cutter()?.config.streaming.onLimitExceeded === 'error_chunk' ? {} : { toolCallGrace: this.toolCallGrace }
      this.meter = new SseMeter(
        completionLimits(this.reservations, this.hooks.wouldTruncate.bind(this.hooks)),
        path,
        this.maxEventBytes,
        framing,
        { count: deltaCounter(this.reservations), hideUsage: this.hideUsage, ...grace },
      )
      return true
    }
    if (contentType?.includes('json')) this.json = []
    return false
  }

  /**
   * One chunk of the body: the bytes to send the client now (undefined:
   * none yet, a stream's event not ended). When `ending` is then set the
   * response ends after them, with closing().
   */
  data(chunk: Buffer): Buffer | undefined {
    const m = this.meter
    if (m !== undefined) {
      if (this.failed !== undefined) return undefined
      try {
        return m.feed(chunk)
      } catch (err) {
        // Whatever the upstream sent, its reader's errors end this stream, never the process.
        this.failed = err instanceof Error ? err : new Error(String(err))
        return undefined
      }
    }
    if (this.json !== undefined) {
      if (this.jsonBytes < JSON_KEEP) this.json.push(chunk)
      this.jsonBytes += chunk.length
      if (this.jsonBytes > JSON_KEEP) this.tail = (this.tail + chunk.toString('latin1')).slice(-TAIL_KEEP)
    }
    return chunk
  }

  /** Set when the stream is to end after the bytes data() returned last. */
  get ending(): StreamEnd | undefined {
    return this.failed !== undefined ? 'unreadable' : this.meter?.ended
  }

  /** At the body's end: the bytes of a stream's last event that never ended, passed on as they came. */
  rest(): Buffer | undefined {
    return this.meter?.rest()
  }

  /** The last events of a stream that ends here (see `ending`; docs/behaviour.md §5 Streaming); settles on what was streamed. */
  closing(): Buffer {
    const m = this.meter!
    const why = this.ending
    if (why !== 'max_completion_tokens' && why !== 'tool_call_unclosed') {
      // The upstream broke the stream: a server error in the API's own shape, whatever the policies say.
      this.hooks.broken?.({
        why: why === 'event_too_large' ? why : 'unreadable',
        reservations: this.reservations,
        maxEventBytes: this.maxEventBytes,
        api: m.facts.api,
        ...(this.failed || m.failure ? { err: this.failed ?? m.failure } : {}),
      })
      this.end(false)
      const message =
        why === 'event_too_large'
          ? `the upstream sent a stream event larger than ${this.maxEventBytes} bytes; the stream was ended`
          : 'the upstream stream could not be read; the stream was ended'
      return Buffer.from(
        upstreamErrorEvent(m.facts, message, why === 'event_too_large' ? 'upstream_event_too_large' : 'upstream_stream_unreadable'),
      )
    }
    const r = this.cutter()!
    this.cutBy = r
    const usage = r.config.streaming.includePartialUsage ? { prompt: m.usage.prompt ?? r.prompt, completion: m.counted } : undefined
    const unclosed = why === 'tool_call_unclosed'
    const events = closingEvents(
      m.facts,
      unclosed || r.config.streaming.onLimitExceeded === 'error_chunk' ? 'error_chunk' : 'graceful_close',
      m.counted,
      usage,
      unclosed ? TOOL_CALL_CUT_MESSAGE : undefined,
    )
    this.hooks.truncated(r, m.counted, unclosed || m.graceUsed > 0 ? { grace: m.graceUsed, closed: !unclosed } : undefined)
    this.end(true)
    return Buffer.from(events)
  }

  /** The response ended (`complete`) or was cut short: client gone, backend failed. Settles once. */
  end(complete: boolean): void {
    if (this.finished) return
    this.finished = true
    const usage: Usage = this.meter?.usage ?? { prompt: undefined, completion: undefined }
    if (this.json !== undefined && complete) {
      if (this.jsonBytes <= JSON_KEEP) {
        try {
          collectUsage(JSON.parse(Buffer.concat(this.json).toString('utf8')), usage)
        } catch {
          // not JSON after all: no usage
        }
      } else usageFromTail(this.tail, usage)
      if (usage.prompt !== undefined && usage.completion === undefined) usage.completion = 0 // embeddings: input only
    }
    const counted = this.meter?.counted
    // A stream's usage is final once it ended by itself, or once its final usage event came before the client left;
    // never when the gateway cut it (the count is the better figure then).
    const usageFinal = this.cutBy === undefined && (counted === undefined || complete || this.meter!.usageFinal)
    const out: Settlement[] = []
    const adjustments: Adjustment[] = []
    for (const r of this.reservations) {
      const { used, by, completion } = useOf(r, usage, usageFinal, counted, this.status)
      if (completion !== undefined && r.config.reservation.mode === 'percentile')
        completionHistory.record(r.minute.key, completion / r.choices)
      out.push({ reservation: r, used, actualPrompt: usage.prompt, by })
      adjustments.push(...settleAdjustments(r, used, this.hooks.overrunCapped))
    }
    const measured = { usage, counted, complete, cut: this.cutBy !== undefined, status: this.status, usageFinal }
    const spent = settleSpends(this.spend, measured, adjustments)
    if (this.trace !== undefined) settledAttributes(this.trace, out)
    const done = (err: Error | null): void => {
      if (err) this.hooks.dropped(err, out)
      else this.hooks.settled(out)
      if (spent.length > 0) this.hooks.spendSettled?.(spent, err ?? undefined)
    }
    if (adjustments.length === 0) return done(null)
    this.hooks.store.adjust(adjustments, this.hooks.now(), done)
  }
}
