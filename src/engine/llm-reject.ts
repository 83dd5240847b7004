/**
 * The bound on how long an LLM client is told to wait (docs/llm.md "Rejects
 * that end"): a token_bucket_llm counter's reject whose wait (until the
 * bucket holds the reservation, or the next UTC midnight) is within
 * FAIRVISOR_LLM_MAX_RETRY_AFTER stays a 429 whose Retry-After, jitter
 * included, is at most the bound: the clients honour a Retry-After up to 60 s
 * (the AI SDK and LangChain ignore or give up on a longer one). A longer wait
 * is answered 403 with `x-should-retry: false`: measured, the OpenAI and
 * Anthropic SDKs sleep through any Retry-After on a 429 (8 hours for a spent
 * day), the AI SDK retries every 429 whatever it says, the Agents SDK retries
 * one over 60 s after its own short backoff; none of them retries a 403.
 * A spent budget in money (`budget_exceeded` of a cost_key llm_price rule) is bounded alike.
 */
import { beyondBoundMessage } from '../algorithms/llm-messages.js'
import type { Decision } from './decision.js'

/** FAIRVISOR_LLM_MAX_RETRY_AFTER's default (s). */
export const DEFAULT_LLM_MAX_RETRY_AFTER_S = 60

/**
 * `d`, a reject, bounded: `waitS` is the rejecting limit's wait before jitter
 * (the moment the request could pass). Other reasons are returned as they are.
 */
export function boundLlmReject(d: Decision, waitS: number, boundS: number): Decision {
  // A budget in money (cost_key llm_price: its rule has a spend part) ends the same way.
  if (d.reason !== 'tpm_exceeded' && d.reason !== 'tpd_exceeded' && d.reason !== 'budget_exceeded') return d
  if (waitS <= boundS) {
    // Jitter is only ever added (engine/jitter.ts), and never past the bound a client honours.
    if (d.retryAfterS !== undefined && d.retryAfterS > boundS) d.retryAfterS = Math.max(1, boundS)
    return d
  }
  d.status = 403
  d.message = beyondBoundMessage(d.reason, waitS)
  return d
}
