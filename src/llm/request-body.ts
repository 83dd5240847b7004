/**
 * What an LLM rule reads from a request body: the JSON (when the held first
 * MiB is the whole body and parses), its `max_tokens` (or the newer
 * `max_completion_tokens` / Responses API `max_output_tokens`), whether it
 * streams, and the text of its prompt. Parsed at most once per request.
 */

/** Bytes of a body held for the decision (docs/behaviour.md §5: up to 1 MiB); the rest streams on unread. */
export const MAX_HELD_BODY = 1024 * 1024

export interface LlmBody {
  /** The parsed object; undefined when there is no body, it was cut at MAX_HELD_BODY, or it is not a JSON object. */
  json: Record<string, unknown> | undefined
  /** The bytes held (at most MAX_HELD_BODY); undefined without a body (decision service). */
  held: Buffer | undefined
  /** Whole body size: Content-Length when declared, else the bytes held. */
  totalBytes: number
  /** The client's completion limit, if it set one. */
  maxTokens: number | undefined
  /** `"stream": true` in the body. */
  stream: boolean
}

export function parseLlmBody(held: Buffer | undefined, contentLength: number | undefined): LlmBody {
  const totalBytes = Math.max(contentLength ?? 0, held?.length ?? 0)
  let json: Record<string, unknown> | undefined
  if (held !== undefined && held.length > 0 && held.length >= totalBytes && held.length <= MAX_HELD_BODY) {
    try {
      const v: unknown = JSON.parse(held.toString('utf8'))
      if (v !== null && typeof v === 'object' && !Array.isArray(v)) json = v as Record<string, unknown>
    } catch {
      // Not JSON: estimated from its size.
    }
  }
  const mt = json?.max_tokens ?? json?.max_completion_tokens ?? json?.max_output_tokens
  return {
    json,
    held,
    totalBytes,
    maxTokens: typeof mt === 'number' && mt > 0 && Number.isFinite(mt) ? Math.ceil(mt) : undefined,
    stream: json?.stream === true,
  }
}

/** Text of one message content: a string, or the `text` of its parts (OpenAI and Anthropic content arrays). */
function contentText(c: unknown, out: string[]): void {
  if (typeof c === 'string') out.push(c)
  else if (Array.isArray(c)) {
    for (const p of c) {
      if (typeof p === 'string') out.push(p)
      else if (p !== null && typeof p === 'object') {
        const t = (p as { text?: unknown; content?: unknown }).text ?? (p as { content?: unknown }).content
        if (t !== undefined) contentText(t, out)
      }
    }
  }
}

/**
 * The prompt's texts: `messages[].content` (Chat Completions, Anthropic),
 * Anthropic's `system`, the Responses API `input`/`instructions`, the legacy
 * `prompt`. Also the number of messages (each costs a few framing tokens).
 */
export function promptTexts(json: Record<string, unknown>): { texts: string[]; messages: number } {
  const texts: string[] = []
  let messages = 0
  if (Array.isArray(json.messages)) {
    for (const m of json.messages) {
      messages++
      if (m !== null && typeof m === 'object') contentText((m as { content?: unknown }).content, texts)
    }
  }
  contentText(json.system, texts)
  contentText(json.instructions, texts)
  if (typeof json.input === 'string') texts.push(json.input)
  else if (Array.isArray(json.input)) {
    for (const m of json.input) {
      messages++
      if (m !== null && typeof m === 'object') contentText((m as { content?: unknown }).content, texts)
      else contentText(m, texts)
    }
  }
  contentText(json.prompt, texts)
  return { texts, messages }
}
