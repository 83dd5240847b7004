/**
 * What a token_bucket_llm reject tells the client, per reject reason, in the
 * words the APIs' own rate-limit errors use (docs/behaviour.md §5
 * token_bucket_llm): the message the error body carries in the shape of the
 * API the request names (llm/dialects/), and whether waiting can ever make
 * the request pass. A request over the rule's per-request sizes never will,
 * so it is answered `x-should-retry: false` (the SDKs read it before
 * Retry-After) instead of a Retry-After.
 */
import type { LlmRejectReason } from './llm.js'

export interface LlmReject {
  message: string
  /** A retry can pass once the limit refills (else the request itself is over the rule's limits). */
  retryable: boolean
}

/** A money budget's per-request cap (llm-price.ts) answers LLM clients the same way. */
export const LLM_REJECTS: Readonly<Record<LlmRejectReason | 'cost_per_request_exceeded', LlmReject>> = {
  prompt_tokens_exceeded: { message: 'The prompt is longer than this API key may send in one request.', retryable: false },
  max_tokens_per_request_exceeded: {
    message: 'The prompt plus the requested completion exceed the tokens allowed per request.',
    retryable: false,
  },
  tpm_exceeded: {
    message: 'Rate limit reached for tokens per minute. Please retry after the time given in Retry-After.',
    retryable: true,
  },
  tpd_exceeded: { message: 'Rate limit reached for tokens per day. Please retry after the time given in Retry-After.', retryable: true },
  cost_per_request_exceeded: {
    message: "The request's estimated cost (its prompt and requested output at the model's price) exceeds the cost allowed per request.",
    retryable: false,
  },
}
