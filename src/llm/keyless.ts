/**
 * An LLM request that carries no API key (a local vLLM, llama.cpp or Ollama
 * server takes none) on a token_bucket_llm rule keyed on `llm:api_key`: keyed
 * on its client address instead of skipping the rule, so leaving the key out
 * never means unlimited (docs/llm.md "API keys"). The value holds a comma,
 * which no key read by `llm:api_key` can (request/api-key.ts refuses one), so
 * no client can name another's key-less bucket by sending it as a key; it is
 * not a credential, so logs show it as it is.
 */
import type { Extractor } from '../request/descriptors.js'

export const KEYLESS_PREFIX = 'keyless,'

/** `extract` (llm:api_key's), falling back to the client address. */
export function orClientAddress(extract: Extractor): Extractor {
  return (v) => {
    const key = extract(v)
    if (key !== undefined) return key
    // Only a gRPC Check naming no source address has none: the rule is then skipped, as before.
    const ip = v.ip
    return ip === '' ? undefined : KEYLESS_PREFIX + ip
  }
}

/** A limit-key value given by orClientAddress: an address, not a credential. */
export function isKeyless(value: string): boolean {
  return value.startsWith(KEYLESS_PREFIX)
}
