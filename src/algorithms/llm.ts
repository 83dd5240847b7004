/**
 * token_bucket_llm (docs/behaviour.md §5): one rule, two limits on existing kinds. The
 * minute bucket (`tpm:llm:`, token-bucket kind: burst_tokens refilling at
 * tokens_per_minute/60) and the UTC-day counter (`tpd:llm:`, window-counter
 * kind aligned on days) are both charged the prompt estimate plus the
 * completion reservation, in the request's single store call, so a day
 * reject leaves the minute bucket untouched (the group rejects as a whole).
 * The two pre-checks (prompt size, request size) need no store at all; the
 * engine runs them (engine/llm-plan.ts). After the response the reservation
 * is settled against the reported usage with one store.adjust call.
 */
import { ENCODINGS, ESTIMATORS, type Estimator } from '../llm/estimate.js'
import { EPSILON, type Algorithm, type HeaderValues, type RuleAlgorithm } from './algorithm.js'
import { bucketLimit, resetSeconds, type BucketLimit } from './kinds/token-bucket/kind.js'
import { counterLimit, type CounterLimit } from './kinds/window-counter/kind.js'

/** The reasons its rejects carry: the minute bucket, the day counter, and the three pre-checks engine/llm-plan.ts runs without a store. */
export type LlmRejectReason =
  | 'tpm_exceeded'
  | 'tpd_exceeded'
  | 'prompt_tokens_exceeded'
  | 'max_tokens_per_request_exceeded'
  | 'burst_tokens_exceeded'

declare module './algorithm.js' {
  interface RejectReasons extends Record<LlmRejectReason, true> {}
}

export interface StreamingConfig {
  enabled: boolean
  enforceMidStream: boolean
  /** Completion tokens between two comparisons with maxCompletion. */
  bufferTokens: number
  onLimitExceeded: 'graceful_close' | 'error_chunk'
  includePartialUsage: boolean
  /** Where a stream is cut: max_completion_tokens, default 2048. */
  maxCompletion: number
}

/**
 * What a request reserves as its completion (`reservation`; docs/llm.md "Reservations"): the
 * completion it asks for (`max_tokens`, the default), `default_max_completion` unless it asks for
 * less (`default`), or the p-th percentile of the key's recent completions, unless it asks for
 * less (`percentile`; `default` until the key has enough of them: llm/completion-history.ts).
 */
export type Reservation = { mode: 'max_tokens' } | { mode: 'default' } | { mode: 'percentile'; p: number }

/** `reservation`'s values: the two names, or `p1` to `p99`. */
export const RESERVATION_PATTERN = '^(max_tokens|default|p[1-9][0-9]?)$'

function reservationOf(v: unknown): Reservation {
  if (v === 'default') return { mode: 'default' }
  if (typeof v === 'string' && /^p[1-9][0-9]?$/.test(v)) return { mode: 'percentile', p: Number(v.slice(1)) }
  return { mode: 'max_tokens' }
}

export interface LlmConfig extends BucketLimit {
  tokensPerMinute: number
  /** burst / rate rounded up (60 s when burst_tokens = tokens_per_minute). */
  windowS: number
  /** The day counter (undefined: no tokens_per_day). */
  day: CounterLimit | undefined
  maxTokensPerRequest: number | undefined
  maxPromptTokens: number | undefined
  /** Caps the reservation (undefined: no cap). */
  maxCompletionTokens: number | undefined
  defaultMaxCompletion: number
  reservation: Reservation
  estimator: Estimator
  /** BPE encoding of the `tokenizer` estimator (default o200k_base). */
  encoding: string
  streaming: StreamingConfig
}

const DAY_S = 86_400

export function normaliseLlm(c: Record<string, unknown>): LlmConfig {
  const tokensPerMinute = Number(c.tokens_per_minute)
  const burst = Number(c.burst_tokens ?? tokensPerMinute)
  const rate = tokensPerMinute / 60
  const num = (v: unknown): number | undefined => (typeof v === 'number' ? v : undefined)
  const ts = (c.token_source ?? {}) as { estimator?: Estimator; encoding?: string }
  const s = (c.streaming ?? {}) as Record<string, unknown>
  const maxCompletionTokens = num(c.max_completion_tokens)
  return {
    ...bucketLimit(rate, burst),
    tokensPerMinute,
    windowS: Math.max(1, Math.ceil(burst / rate - EPSILON)),
    day: typeof c.tokens_per_day === 'number' ? counterLimit(c.tokens_per_day, DAY_S, 0) : undefined,
    maxTokensPerRequest: num(c.max_tokens_per_request),
    maxPromptTokens: num(c.max_prompt_tokens),
    maxCompletionTokens,
    defaultMaxCompletion: num(c.default_max_completion) ?? 1000,
    reservation: reservationOf(c.reservation),
    estimator: ts.estimator ?? 'simple_word',
    encoding: ts.encoding ?? 'o200k_base',
    streaming: {
      enabled: s.enabled !== false,
      enforceMidStream: s.enforce_mid_stream !== false,
      bufferTokens: num(s.buffer_tokens) ?? 100,
      onLimitExceeded: s.on_limit_exceeded === 'error_chunk' ? 'error_chunk' : 'graceful_close',
      includePartialUsage: s.include_partial_usage !== false,
      maxCompletion: maxCompletionTokens ?? 2048,
    },
  }
}

/** The minute bucket: what a bundle's token_bucket_llm rule names; its limit is the whole config. */
export const LLM_MINUTE: RuleAlgorithm<LlmConfig> = {
  name: 'token_bucket_llm',
  keyPrefix: 'tpm:llm:',
  rejectReason: 'tpm_exceeded',
  llm: true,
  configSchema: {
    type: 'object',
    required: ['tokens_per_minute'],
    properties: {
      tokens_per_minute: { $ref: '#/$defs/positive' },
      tokens_per_day: { $ref: '#/$defs/positive' },
      burst_tokens: { $ref: '#/$defs/positive' },
      max_tokens_per_request: { $ref: '#/$defs/positiveInteger' },
      max_prompt_tokens: { $ref: '#/$defs/positiveInteger' },
      max_completion_tokens: { $ref: '#/$defs/positiveInteger' },
      default_max_completion: { $ref: '#/$defs/positiveInteger' },
      reservation: { type: 'string', pattern: RESERVATION_PATTERN },
      token_source: {
        type: 'object',
        properties: {
          estimator: { enum: [...ESTIMATORS] },
          encoding: { enum: [...ENCODINGS] },
        },
      },
      streaming: {
        type: 'object',
        properties: {
          enabled: { type: 'boolean' },
          enforce_mid_stream: { type: 'boolean' },
          buffer_tokens: { $ref: '#/$defs/positiveInteger' },
          on_limit_exceeded: { enum: ['graceful_close', 'error_chunk'] },
          include_partial_usage: { type: 'boolean' },
        },
      },
    },
  },
  check(c, out) {
    if (typeof c.burst_tokens === 'number' && c.burst_tokens < (c.tokens_per_minute as number))
      out.push({
        field: 'burst_tokens',
        message: `burst_tokens (${c.burst_tokens}) must be at least tokens_per_minute (${String(c.tokens_per_minute)})`,
      })
    const tpd = c.tokens_per_day,
      burst = (c.burst_tokens ?? c.tokens_per_minute) as number
    if (typeof tpd === 'number' && tpd < burst)
      out.push({
        field: 'tokens_per_day',
        message: `tokens_per_day (${tpd}) is below burst_tokens (${burst}), so the day counter rejects before the minute bucket is ever empty`,
        warning: true,
      })
  },
  capacity: (l) => l.burst,
  normalise: normaliseLlm,
  headers(l, tokens, retryAfter, rejected): HeaderValues {
    if (rejected) return { limit: l.burst, remaining: 0, resetS: retryAfter, windowS: l.windowS }
    return { limit: l.burst, remaining: Math.max(0, Math.floor(tokens)), resetS: resetSeconds(tokens, l.rate), windowS: l.windowS }
  },
  describe: (l, tokens) => `minute bucket ${Math.floor(tokens)}/${l.burst} tokens left`,
}

/**
 * The day counter of the same rule (its limit comes from normaliseLlm): its own prefix, reason, headers
 * (keys end in `:<YYYYMMDD>`) and jitter bound.
 */
export const LLM_DAY: Algorithm<CounterLimit> = {
  name: 'token_bucket_llm',
  keyPrefix: 'tpd:llm:',
  rejectReason: 'tpd_exceeded',
  headers(l, used, secondsToEnd, rejected): HeaderValues {
    return {
      limit: l.limit,
      remaining: rejected ? 0 : Math.max(0, Math.floor(l.limit - used + EPSILON)),
      resetS: secondsToEnd,
      windowS: DAY_S,
    }
  },
  describe: (l, used) => `day counter ${used}/${l.limit} tokens used`,
  // It ends at a fixed instant (UTC midnight), as a cost_based period does: a crowd rejected at 17:00 is already
  // spread by its own arrival times, and half a day of jitter would send clients back hours after the reset.
  retryJitterMaxS: 60,
}

/** `YYYYMMDD` of the UTC day of `nowMs`: the day counter's key suffix (docs/behaviour.md §4). */
export function utcDay(nowMs: number): string {
  const d = new Date(nowMs)
  return `${d.getUTCFullYear()}${String(d.getUTCMonth() + 1).padStart(2, '0')}${String(d.getUTCDate()).padStart(2, '0')}`
}
