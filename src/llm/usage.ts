/**
 * Token usage as LLM APIs report it, merged across the events of a stream:
 * OpenAI Chat Completions (`usage.prompt_tokens` / `completion_tokens`, in a
 * JSON body or the last SSE chunk with stream_options.include_usage), the
 * Responses API (`usage.input_tokens` / `output_tokens`, SSE
 * `response.completed`), Anthropic Messages (`usage.input_tokens` +
 * cache tokens / `output_tokens`; SSE `message_start`, then cumulative
 * `message_delta`). Also the completion text of one stream event.
 */

export interface Usage {
  prompt: number | undefined
  completion: number | undefined
}

const num = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : undefined)

/** Adds what one usage object says to `into` (later values win: Anthropic's output_tokens are cumulative). */
function mergeUsage(u: unknown, into: Usage): void {
  if (u === null || typeof u !== 'object') return
  const o = u as Record<string, unknown>
  const input = num(o.prompt_tokens) ?? num(o.input_tokens)
  if (input !== undefined) into.prompt = input + (num(o.cache_creation_input_tokens) ?? 0) + (num(o.cache_read_input_tokens) ?? 0)
  const output = num(o.completion_tokens) ?? num(o.output_tokens)
  if (output !== undefined) into.completion = output
}

/** Usage carried by a JSON response body or one SSE event's data object. */
export function collectUsage(obj: unknown, into: Usage): void {
  if (obj === null || typeof obj !== 'object') return
  const o = obj as Record<string, unknown>
  mergeUsage(o.usage, into)
  const inner = (o.response ?? o.message) as Record<string, unknown> | undefined // response.completed, message_start
  if (inner !== null && typeof inner === 'object') mergeUsage(inner.usage, into)
}

/** Completion text one stream event adds (OpenAI delta content, Anthropic text delta, Responses output_text delta). */
export function deltaText(obj: unknown): string | undefined {
  if (obj === null || typeof obj !== 'object') return undefined
  const o = obj as Record<string, unknown>
  const choices = o.choices
  if (Array.isArray(choices)) {
    const c = (choices[0] as { delta?: { content?: unknown } } | undefined)?.delta?.content
    return typeof c === 'string' ? c : undefined
  }
  if (o.type === 'content_block_delta') {
    const t = (o.delta as { text?: unknown } | undefined)?.text
    return typeof t === 'string' ? t : undefined
  }
  if (o.type === 'response.output_text.delta' && typeof o.delta === 'string') return o.delta
  return undefined
}

/**
 * The `usage` object of a JSON body seen only in part (larger than what is
 * kept): the last `"usage":{…}` in its tail, braces matched. Both OpenAI and
 * Anthropic put usage at the end of the body.
 */
export function usageFromTail(tail: string, into: Usage): void {
  const at = tail.lastIndexOf('"usage"')
  if (at === -1) return
  const open = tail.indexOf('{', at)
  if (open === -1) return
  let depth = 0
  let inString = false
  for (let i = open; i < tail.length; i++) {
    const ch = tail[i]
    if (inString) {
      if (ch === '\\') i++
      else if (ch === '"') inString = false
    } else if (ch === '"') inString = true
    else if (ch === '{') depth++
    else if (ch === '}' && --depth === 0) {
      try {
        mergeUsage(JSON.parse(tail.slice(open, i + 1)), into)
      } catch {
        // not a usage object after all
      }
      return
    }
  }
}
