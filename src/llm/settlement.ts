/**
 * What one reservation settles at once its call is over (docs/llm.md
 * "Settlement"): the reported usage when it is the call's final figure, else
 * the streamed tokens counted (a stream without usage, one cut by the gateway,
 * one the client left before the usage came: the count beats Anthropic's
 * message_start placeholder), else nothing for an error answer or none at
 * all (the provider charges nothing), else the whole reservation (a JSON
 * answer without usage). Also what a call's reservations make of its
 * stream: its counter and its completion limits.
 */
import type { LlmReservation } from '../engine/decision.js'
import { tokenCounter } from './estimate.js'
import type { CompletionLimit } from './sse-meter.js'
import type { Usage } from './usage.js'

/** A stream's tokens are counted with the tokenizer of the first rule that has one, else estimated (text-tokens.ts). */
export function deltaCounter(reservations: readonly LlmReservation[]): ((text: string) => number) | undefined {
  const r = reservations.find((x) => x.config.estimator === 'tokenizer')
  return r === undefined ? undefined : tokenCounter(r.config.encoding)
}

/**
 * The completion limits of a call's reservations: a limit cuts when its rule enforces mid-stream
 * on a stream the client asked for; else it reports `wouldTruncate` with why not.
 */
export function completionLimits(
  reservations: readonly LlmReservation[],
  wouldTruncate: (r: LlmReservation, counted: number, why: string) => void,
): CompletionLimit[] {
  return reservations.map((r) => {
    const why = r.shadow
      ? 'shadow'
      : !r.config.streaming.enforceMidStream
        ? 'enforce_mid_stream_off'
        : !r.streaming
          ? 'not_streaming'
          : undefined
    return {
      // Each of `n` choices may use max_completion_tokens: the stream's count is theirs together.
      maxCompletion: r.config.streaming.maxCompletion * r.choices,
      bufferTokens: r.config.streaming.bufferTokens,
      enforce: why === undefined,
      wouldTruncate: (n: number) => wouldTruncate(r, n, why ?? 'shadow'),
    }
  })
}

export type SettledBy = 'usage' | 'counted' | 'reserved' | 'refunded'

export interface Use {
  /** Tokens the call used as settled (prompt + completion). */
  used: number
  by: SettledBy
  /** The completion within `used`, when known (usage or count). */
  completion: number | undefined
}

/**
 * `usageFinal`: the usage may be trusted as the call's own (a JSON body read whole, a stream that
 * ended by itself or whose final usage had arrived before the client left; never a cut stream);
 * `counted`: a stream's counted completion (undefined: not a stream); `status`: the answer's (0: none).
 */
export function useOf(r: LlmReservation, usage: Usage, usageFinal: boolean, counted: number | undefined, status: number): Use {
  if (usageFinal && usage.prompt !== undefined && usage.completion !== undefined)
    return { used: usage.prompt + usage.completion, by: 'usage', completion: usage.completion }
  if (counted !== undefined) {
    const completion = Math.max(counted, usage.completion ?? 0)
    return { used: (usage.prompt ?? r.prompt) + completion, by: 'counted', completion }
  }
  if (status >= 400 || status === 0) return { used: 0, by: 'refunded', completion: undefined }
  return { used: r.reserved, by: 'reserved', completion: undefined }
}
