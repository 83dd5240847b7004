/**
 * Token usage as LLM APIs report it, merged across the events of a stream:
 * OpenAI Chat Completions and embeddings (`usage.prompt_tokens` /
 * `completion_tokens`, in a JSON body or the last SSE chunk with
 * stream_options.include_usage), the Responses API (`usage.input_tokens` /
 * `output_tokens`, SSE `response.completed` / `response.incomplete`),
 * Anthropic Messages (`usage.input_tokens` + cache tokens / `output_tokens`;
 * SSE `message_start`, then cumulative `message_delta`). Also the completion
 * tokens' text of one stream event.
 */

export interface Usage {
  prompt: number | undefined
  completion: number | undefined
  /** Of `prompt`, the tokens read from the provider's prompt cache (OpenAI's `prompt_tokens_details.cached_tokens`, the Responses API's `input_tokens_details.cached_tokens`): priced apart (llm/spend-settle.ts). */
  cached?: number
  /** Anthropic input parts, kept apart because a later event may repeat only some of them. */
  input?: number
  cacheCreation?: number
  cacheRead?: number
}

const num = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : undefined)

/** Adds what one usage object says to `into` (later values win: Anthropic's counters are cumulative). */
function mergeUsage(u: unknown, into: Usage): void {
  if (u === null || typeof u !== 'object') return
  const o = u as Record<string, unknown>
  const input = num(o.prompt_tokens) ?? num(o.input_tokens)
  if (input !== undefined) into.input = input
  // Anthropic bills cache writes and reads as input on top of input_tokens (OpenAI's cached tokens are inside prompt_tokens).
  const creation = num(o.cache_creation_input_tokens)
  if (creation !== undefined) into.cacheCreation = creation
  const read = num(o.cache_read_input_tokens)
  if (read !== undefined) into.cacheRead = read
  if (into.input !== undefined) into.prompt = into.input + (into.cacheCreation ?? 0) + (into.cacheRead ?? 0)
  const details = o.prompt_tokens_details ?? o.input_tokens_details
  const cached = details !== null && typeof details === 'object' ? num((details as Record<string, unknown>).cached_tokens) : undefined
  if (cached !== undefined) into.cached = cached
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

const str = (v: unknown): string => (typeof v === 'string' ? v : '')

/**
 * Characters of completion one stream event adds: message text, tool-call
 * arguments and thinking, in each API's deltas (all are billed as output).
 */
export function deltaText(obj: unknown): string {
  if (obj === null || typeof obj !== 'object') return ''
  const o = obj as Record<string, unknown>
  const choices = o.choices
  if (Array.isArray(choices)) {
    let text = ''
    for (const c of choices as {
      delta?: { content?: unknown; reasoning_content?: unknown; tool_calls?: unknown; function_call?: { arguments?: unknown } }
    }[]) {
      const d = c?.delta
      if (d === undefined || d === null) continue
      text += str(d.content) + str(d.reasoning_content) + str(d.function_call?.arguments)
      if (Array.isArray(d.tool_calls))
        for (const t of d.tool_calls as { function?: { arguments?: unknown } }[]) text += str(t?.function?.arguments)
    }
    return text
  }
  switch (o.type) {
    case 'content_block_delta': {
      const d = o.delta as { text?: unknown; partial_json?: unknown; thinking?: unknown } | undefined
      return d === undefined || d === null ? '' : str(d.text) + str(d.partial_json) + str(d.thinking)
    }
    case 'response.output_text.delta':
    case 'response.function_call_arguments.delta':
    case 'response.reasoning_text.delta':
    case 'response.reasoning_summary_text.delta':
    case 'response.refusal.delta':
      return str(o.delta)
  }
  return ''
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
