/**
 * What a token_bucket_llm reject tells the client, per reject reason, in the
 * words the APIs' own errors use (docs/llm.md "Rejects that end"): the
 * message the error body carries in the shape of the API the request names
 * (llm/dialects/), and whether waiting can ever make the request pass. A
 * request larger than the rule lets one request be (its prompt, prompt plus
 * completion, or more than the bucket can ever hold) never will: it is
 * answered 400 in the API's `invalid_request_error` shape, as the APIs
 * answer a prompt over their context window, which no client retries. The
 * two counters' rejects are 429s with Retry-After while the wait is within
 * FAIRVISOR_LLM_MAX_RETRY_AFTER, else 403 (engine/llm-reject.ts).
 */
import type { LlmRejectReason } from './llm.js'

export interface LlmReject {
  message: string
  /** The request as sent can never pass: answered 400 (else 429, or 403 past the retry bound). */
  tooLarge: boolean
}

/** A money budget's per-request cap (llm-price.ts) answers LLM clients the same way: a 400. */
export const LLM_REJECTS: Readonly<Record<LlmRejectReason | 'cost_per_request_exceeded', LlmReject>> = {
  prompt_tokens_exceeded: { message: 'The prompt is longer than this API key may send in one request.', tooLarge: true },
  max_tokens_per_request_exceeded: {
    message: 'The prompt plus the requested completion exceed the tokens allowed per request.',
    tooLarge: true,
  },
  burst_tokens_exceeded: {
    message: "The prompt plus the requested completion exceed what this API key's token bucket can ever hold.",
    tooLarge: true,
  },
  tpm_exceeded: {
    message: 'Rate limit reached for tokens per minute. Please retry after the time given in Retry-After.',
    tooLarge: false,
  },
  tpd_exceeded: { message: 'Rate limit reached for tokens per day. Please retry after the time given in Retry-After.', tooLarge: false },
  cost_per_request_exceeded: {
    message: "The request's estimated cost (its prompt and requested output at the model's price) exceeds the cost allowed per request.",
    tooLarge: true,
  },
}

/** The message of a counter's reject whose wait passes the bound (status 403): no retry, and when it could pass. */
export function beyondBoundMessage(reason: 'tpm_exceeded' | 'tpd_exceeded' | 'budget_exceeded', waitS: number): string {
  const what = reason === 'tpd_exceeded' ? 'tokens per day' : reason === 'tpm_exceeded' ? 'tokens per minute' : 'the budget in money'
  return `Rate limit reached for ${what}. It resets in ${Math.ceil(waitS)} s, longer than a client should wait: do not retry before then.`
}

/** The message of burst_tokens_exceeded, with the figures that make it so. */
export function burstMessage(reserved: number, capacity: number): string {
  return `The prompt plus the requested completion (${reserved} tokens) exceed what this API key's token bucket can ever hold (${capacity} tokens).`
}
