/**
 * Prompt token estimates (docs/behaviour.md §5 token_bucket_llm), each over every billed part
 * of the body (prompt-parts.ts): `simple_word` (characters / 4 of those texts for ASCII, more
 * for other scripts: text-tokens.ts; plus IMAGE_TOKENS per image; a body that is not such JSON:
 * ceil(bytes / 4)),
 * `header_hint` (`X-Token-Estimate`, simple_word when absent), and
 * `tokenizer`: the real BPE count of the prompt text (gpt-tokenizer, pure JS;
 * measured 15× faster than js-tiktoken on a 4 KB prompt, docs/benchmarks.md
 * "Tokenizer choice"), plus the
 * chat framing tokens. Bodies larger than what was held are scaled up by
 * Content-Length / bytes held.
 */
import { createRequire } from 'node:module'
import { IMAGE_TOKENS, promptParts } from './prompt-parts.js'
import { MAX_HELD_BODY, type LlmBody } from './request-body.js'
import { roundTokens, textWeight } from './text-tokens.js'

/** The estimators a token_bucket_llm rule may name (the LLM config schema's enum). */
export const ESTIMATORS = ['simple_word', 'header_hint', 'tokenizer'] as const
export type Estimator = (typeof ESTIMATORS)[number]

/** The BPE encodings the tokenizer estimator can load (the LLM config schema's enum). */
export const ENCODINGS = ['o200k_base', 'cl100k_base', 'p50k_base', 'r50k_base'] as const

type Count = (text: string) => number
const require = createRequire(import.meta.url)
const counters = new Map<string, Count>()

/**
 * The token counter of `encoding`, loaded synchronously once per process
 * (~130 ms for o200k_base): bundle compilation calls this, so the first
 * request does not pay for it.
 */
export function tokenCounter(encoding: string): Count {
  let c = counters.get(encoding)
  if (c === undefined) {
    const m = require(`gpt-tokenizer/encoding/${encoding}`) as { countTokens(t: string): number }
    // Special-token text in a prompt (`<|endoftext|>`) is counted as plain text, never rejected.
    c = (t) => m.countTokens(t)
    counters.set(encoding, c)
  }
  return c
}

/** Framing per chat message and for the reply (OpenAI's published counting recipe). */
const PER_MESSAGE = 3
const PER_REPLY = 3

function simpleWordEstimate(b: LlmBody): number {
  if (b.json !== undefined) {
    const p = promptParts(b.json)
    if (p.found) {
      // Characters / 4 for ASCII, more for the scripts a tokenizer spends more on (text-tokens.ts).
      let weight = 0
      for (const t of p.texts) weight += textWeight(t)
      return roundTokens(weight) + p.images * IMAGE_TOKENS + p.tokenIds
    }
  }
  return Math.ceil(b.totalBytes / 4)
}

function tokenizerEstimate(b: LlmBody, encoding: string): number {
  const count = tokenCounter(encoding)
  if (b.json !== undefined) {
    const p = promptParts(b.json)
    if (p.found) {
      let n = 0
      for (const t of p.texts) n += count(t)
      return n + p.images * IMAGE_TOKENS + p.tokenIds + (p.messages > 0 ? p.messages * PER_MESSAGE + PER_REPLY : 0)
    }
  }
  if (b.held === undefined || b.held.length === 0) return Math.ceil(b.totalBytes / 4)
  // Not JSON, or not read whole: count the first MiB, scale to the whole.
  const sample = b.held.length > MAX_HELD_BODY ? b.held.subarray(0, MAX_HELD_BODY) : b.held
  return Math.ceil(count(sample.toString('utf8')) * (b.totalBytes / sample.length))
}

/** X-Token-Estimate as a positive integer, else undefined. */
function headerHint(raw: string | undefined): number | undefined {
  if (raw === undefined || !/^\s*\d+\s*$/.test(raw)) return undefined
  const n = Number(raw)
  return n > 0 && Number.isSafeInteger(n) ? n : undefined
}

export function estimatePrompt(estimator: Estimator, encoding: string, body: LlmBody, hint: string | undefined): number {
  const n =
    estimator === 'header_hint'
      ? (headerHint(hint) ?? simpleWordEstimate(body))
      : estimator === 'tokenizer'
        ? tokenizerEstimate(body, encoding)
        : simpleWordEstimate(body)
  // A chunked body read past its first MiB and not estimated as JSON (it passed its read
  // budget, http/llm-body.ts) counts at least its size / 4, whatever the estimator: the budget is in those units.
  if (body.json === undefined && body.held !== undefined && body.held.length > MAX_HELD_BODY)
    return Math.max(n, Math.ceil(body.totalBytes / 4))
  return n
}
