/**
 * What an LLM rule reads from a request body: the JSON (when what was held
 * is the whole body and parses), the completion it asks for (the largest of
 * `max_tokens`, `max_completion_tokens` and the Responses API
 * `max_output_tokens`: an upstream bills whichever it honours, so a client
 * must not shrink its reservation by sending a small one next to a large
 * one; Gemini's, Bedrock's and Ollama's own fields too, providers/), how many completions it asks
 * for (`n`, `best_of`: each is billed), whether it streams, and every part of it the upstream bills as
 * prompt (prompt-parts.ts). Parsed at most once per request.
 */
import { providerCap } from './providers/index.js'

/** Bytes of a body held for the decision (docs/behaviour.md §5: up to 1 MiB); the rest streams on unread. */
export const MAX_HELD_BODY = 1024 * 1024

export interface LlmBody {
  /** The parsed object; undefined when there is no body, it was not read whole, or it is not a JSON object. */
  json: Record<string, unknown> | undefined
  /** The bytes held; undefined without a body (decision service). */
  held: Buffer | undefined
  /** Whole body size: Content-Length when declared, else the bytes held. */
  totalBytes: number
  /** The client's completion limit, if it set one. */
  maxTokens: number | undefined
  /** The body asks for a stream: `"stream"` set to anything truthy (`true`, `"true"`, 1), as lax upstreams read it. */
  stream: boolean
  /** Completions the upstream generates and bills: the largest of `n` and `best_of` (legacy completions), else 1. */
  choices: number
}

/** Past any API's own bound (OpenAI: 128), yet finite whatever a body says (`1e400` parses as Infinity). */
const MAX_CHOICES = 1_000_000

const completionFields = ['max_tokens', 'max_completion_tokens', 'max_output_tokens'] as const

/** The largest positive completion limit among the fields present; undefined when none is. */
function largestCompletion(json: Record<string, unknown> | undefined): number | undefined {
  if (json === undefined) return undefined
  let max: number | undefined
  for (const f of completionFields) {
    let v = json[f]
    // Lax upstreams coerce "100000" to a number: so must the reservation.
    if (typeof v === 'string' && /^\s*\d+(\.\d+)?\s*$/.test(v)) v = Number(v)
    if (typeof v === 'number' && v > 0 && Number.isFinite(v)) max = Math.max(max ?? 0, Math.ceil(v))
  }
  const own = providerCap(json)
  return own === undefined ? max : Math.max(max ?? 0, own)
}

/** The largest of `n` and `best_of` as lax upstreams read them (numbers or numeric strings, rounded up); 1 when neither asks for more. */
function choicesOf(json: Record<string, unknown> | undefined): number {
  if (json === undefined) return 1
  let most = 1
  for (const f of ['n', 'best_of'] as const) {
    let v = json[f]
    if (typeof v === 'string' && /^\s*\d+(\.\d+)?\s*$/.test(v)) v = Number(v)
    if (typeof v === 'number' && v > 1) most = Math.max(most, Math.min(MAX_CHOICES, Math.ceil(v)))
  }
  return most
}

/** `stream` as permissive servers read it: a boolean, or anything truthy but the strings "false"/"0"/"". */
export function truthyStream(v: unknown): boolean {
  if (v === undefined || v === null || v === false) return false
  if (typeof v === 'string') return !['', 'false', '0', 'no', 'off'].includes(v.trim().toLowerCase())
  if (typeof v === 'number') return v !== 0 && !Number.isNaN(v)
  return true
}

/** `wholeBody`: `held` is known to be the entire body (it may then exceed MAX_HELD_BODY). */
export function parseLlmBody(held: Buffer | undefined, contentLength: number | undefined, wholeBody = false): LlmBody {
  const totalBytes = Math.max(contentLength ?? 0, held?.length ?? 0)
  let json: Record<string, unknown> | undefined
  if (held !== undefined && held.length > 0 && held.length >= totalBytes && (wholeBody || held.length <= MAX_HELD_BODY)) {
    try {
      const v: unknown = JSON.parse(held.toString('utf8'))
      if (v !== null && typeof v === 'object' && !Array.isArray(v)) json = v as Record<string, unknown>
    } catch {
      // Not JSON: estimated from its size.
    }
  }
  return { json, held, totalBytes, maxTokens: largestCompletion(json), stream: truthyStream(json?.stream), choices: choicesOf(json) }
}
