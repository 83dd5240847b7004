/**
 * Token usage as LLM APIs report it, merged across the events of a stream:
 * OpenAI Chat Completions and embeddings (`usage.prompt_tokens` /
 * `completion_tokens`, in a JSON body or the last SSE chunk with
 * stream_options.include_usage), the Responses API (`usage.input_tokens` /
 * `output_tokens`, SSE `response.completed` / `response.incomplete`),
 * Anthropic Messages (`usage.input_tokens` + cache tokens / `output_tokens`;
 * SSE `message_start`, then cumulative `message_delta`), Groq's `x_groq.usage`; Gemini, Bedrock and
 * Ollama through providers/. Also the completion text and audio of one stream event.
 */
import { providerText, providerUsage } from './providers/index.js'

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

/** Adds what one usage object says to `into` (later values win: Anthropic's counters are cumulative); whether it was one. */
function mergeUsage(u: unknown, into: Usage): boolean {
  if (u === null || typeof u !== 'object') return false
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
  return true
}

/** Usage carried by a JSON response body or one SSE event's data object; whether it carried any. */
export function collectUsage(obj: unknown, into: Usage): boolean {
  if (obj === null || typeof obj !== 'object') return false
  const o = obj as Record<string, unknown>
  let found = mergeUsage(o.usage, into)
  const inner = (o.response ?? o.message ?? o.x_groq) as Record<string, unknown> | undefined // response.completed, message_start, Groq
  if (inner !== null && typeof inner === 'object') found = mergeUsage(inner.usage, into) || found
  return providerUsage(o, into) || found
}

const str = (v: unknown): string => (typeof v === 'string' ? v : '')

/**
 * Characters of completion one stream event adds: message text, legacy
 * completions' text, tool-call arguments, thinking and audio transcripts, in
 * each API's deltas (all are billed as output).
 */
export function deltaText(obj: unknown): string {
  if (obj === null || typeof obj !== 'object') return ''
  const o = obj as Record<string, unknown>
  const choices = o.choices
  if (Array.isArray(choices)) {
    let text = ''
    for (const c of choices as {
      text?: unknown
      delta?: {
        content?: unknown
        reasoning_content?: unknown
        tool_calls?: unknown
        function_call?: { arguments?: unknown }
        audio?: { transcript?: unknown }
      }
    }[]) {
      if (c === null || typeof c !== 'object') continue
      text += str(c.text) // legacy /v1/completions
      const d = c.delta
      if (d === undefined || d === null) continue
      text += str(d.content) + str(d.reasoning_content) + str(d.function_call?.arguments) + str(d.audio?.transcript)
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
    case 'response.output_audio_transcript.delta':
    case 'response.audio_transcript.delta':
      return str(o.delta)
  }
  return providerText(o)
}

/** 24 kHz 16-bit mono (the streamed format) is 48,000 bytes a second, 64,000 base64 characters. */
const BASE64_PER_SECOND = 64_000
/** Output audio tokens a second of speech (OpenAI's audio models: about one per 50 ms). */
const AUDIO_TOKENS_PER_SECOND = 20

/**
 * Completion tokens of the audio one stream event adds (base64 data: Chat
 * Completions `delta.audio.data`, Responses `response.output_audio.delta`,
 * speech `speech.audio.delta`), at AUDIO_TOKENS_PER_SECOND of its duration.
 */
export function deltaAudioTokens(obj: unknown): number {
  if (obj === null || typeof obj !== 'object') return 0
  const o = obj as Record<string, unknown>
  let chars = 0
  if (Array.isArray(o.choices))
    for (const c of o.choices as { delta?: { audio?: { data?: unknown } } }[]) chars += str(c?.delta?.audio?.data).length
  else if (o.type === 'response.output_audio.delta' || o.type === 'response.audio.delta') chars = str(o.delta).length
  else if (o.type === 'speech.audio.delta') chars = str(o.audio).length
  return chars === 0 ? 0 : Math.ceil((chars / BASE64_PER_SECOND) * AUDIO_TOKENS_PER_SECOND)
}

/**
 * The `usage` object of a JSON body seen only in part (larger than what is
 * kept): the last `"usage":{…}` in its tail, braces matched. Both OpenAI and
 * Anthropic put usage at the end of the body (Bedrock too; Gemini its `"usageMetadata"`,
 * after an image's data).
 */
export function usageFromTail(tail: string, into: Usage): void {
  const name = tail.lastIndexOf('"usage"') === -1 ? 'usageMetadata' : 'usage'
  const at = tail.lastIndexOf(`"${name}"`)
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
        collectUsage({ [name]: JSON.parse(tail.slice(open, i + 1)) }, into)
      } catch {
        // not a usage object after all
      }
      return
    }
  }
}
