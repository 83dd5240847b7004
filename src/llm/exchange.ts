/**
 * One LLM call after the decision: reads the response as it passes (never
 * delaying a chunk), cuts an over-long stream, and settles the request's
 * reservations once — one store.adjust for all its counters — so they end
 * at what was really used: the reported usage when there is one, else the
 * streamed tokens counted (SSE, a cut, a client gone mid-stream), else the
 * reservation is kept (a JSON answer without usage). An error answer
 * (status ≥ 400) or no answer at all without usage is given back whole: the
 * provider charges nothing for it. A store failure drops the settlement
 * (logged, counted) and never holds the response.
 */
import type { LlmReservation } from '../engine/decision.js'
import type { Adjustment, Store } from '../store/store.js'
import { settleAdjustments, type OverrunCapped } from './settle-cap.js'
import { SseMeter } from './sse-meter.js'
import { collectUsage, usageFromTail, type Usage } from './usage.js'

/** JSON bodies up to this size are parsed whole; of larger ones only the tail is searched for usage. */
const JSON_KEEP = 1024 * 1024
const TAIL_KEEP = 64 * 1024

export type SettledBy = 'usage' | 'counted' | 'reserved' | 'refunded'

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
  wouldTruncate(r: LlmReservation, counted: number): void
  truncated(r: LlmReservation, counted: number): void
  /** An overrun charge was capped (settle-cap.ts). */
  overrunCapped?(c: OverrunCapped): void
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

  constructor(
    private readonly reservations: readonly LlmReservation[],
    private readonly hooks: ExchangeHooks,
  ) {}

  /** The response head: SSE is metered, JSON kept (bounded) for its usage. */
  headers(status: number, contentType: string | undefined, contentEncoding: string | undefined): void {
    this.status = status
    if (contentEncoding !== undefined && contentEncoding !== 'identity') return // compressed: usage unreadable
    if (contentType?.includes('text/event-stream')) {
      this.meter = new SseMeter(this.reservations.map((r) => ({
        maxCompletion: r.config.streaming.maxCompletion,
        bufferTokens: r.config.streaming.bufferTokens,
        enforce: r.streaming && !r.shadow && r.config.streaming.enforceMidStream,
        wouldTruncate: (n) => this.hooks.wouldTruncate(r, n),
      })))
    } else if (contentType?.includes('json')) this.json = []
  }

  /** One chunk of the body: -1 to pass it whole, else the offset after which the stream ends (see closing()). */
  data(chunk: Buffer): number {
    if (this.meter !== undefined) return this.meter.feed(chunk)
    if (this.json !== undefined) {
      if (this.jsonBytes < JSON_KEEP) this.json.push(chunk)
      this.jsonBytes += chunk.length
      if (this.jsonBytes > JSON_KEEP) this.tail = (this.tail + chunk.toString('latin1')).slice(-TAIL_KEEP)
    }
    return -1
  }

  /** The last event of a cut stream (docs/behaviour.md §5 Streaming); settles on what was streamed. */
  closing(): Buffer {
    const r = this.reservations.find((x) => x.streaming && !x.shadow && x.config.streaming.enforceMidStream)!
    this.cutBy = r
    const m = this.meter!
    const prompt = m.usage.prompt ?? r.prompt
    const usage = r.config.streaming.includePartialUsage ? `,"usage":{"prompt_tokens":${prompt},"completion_tokens":${m.counted},"total_tokens":${prompt + m.counted}}` : ''
    const event = r.config.streaming.onLimitExceeded === 'error_chunk'
      ? `{"error":{"message":"max completion tokens exceeded","type":"rate_limit_error","code":"completion_tokens_exceeded"}${usage}}`
      : `{"choices":[{"delta":{},"finish_reason":"length"}]${usage}}`
    this.hooks.truncated(r, m.counted)
    this.end(true)
    return Buffer.from(`data: ${event}\n\n`)
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
    }
    const counted = this.meter?.counted
    const out: Settlement[] = []
    const adjustments: Adjustment[] = []
    for (const r of this.reservations) {
      let used: number
      let by: SettledBy
      if (usage.prompt !== undefined && usage.completion !== undefined && this.cutBy === undefined) {
        used = usage.prompt + usage.completion
        by = 'usage'
      } else if (counted !== undefined) {
        // A stream without usage, a cut one, or one the client left: what was streamed.
        used = (usage.prompt ?? r.prompt) + Math.max(counted, usage.completion ?? 0)
        by = 'counted'
      } else if (this.status >= 400 || this.status === 0) {
        used = 0
        by = 'refunded'
      } else {
        used = r.reserved
        by = 'reserved'
      }
      out.push({ reservation: r, used, actualPrompt: usage.prompt, by })
      adjustments.push(...settleAdjustments(r, used, this.hooks.overrunCapped))
    }
    if (adjustments.length === 0) return this.hooks.settled(out)
    this.hooks.store.adjust(adjustments, this.hooks.now(), (err) => (err ? this.hooks.dropped(err, out) : this.hooks.settled(out)))
  }
}
