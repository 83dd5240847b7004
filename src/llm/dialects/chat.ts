/**
 * Chat Completions' dialect for the events the gateway writes into a stream:
 * the closing chunk as OpenAI ends a reply cut at max_tokens (each choice
 * with `finish_reason: "length"`), the usage chunk as OpenAI sends it with
 * stream_options.include_usage, then `[DONE]`; and the error event
 * (`{"error":{…}}`, which the OpenAI SDKs raise as an API error).
 */
import type { CutUsage, ErrorKind } from './event-parts.js'
import type { StreamFacts } from './stream-facts.js'

export function chatClose(f: StreamFacts, usage: CutUsage | undefined): string {
  const c = f.chat
  const head = {
    id: c.id ?? 'chatcmpl-fairvisor',
    object: 'chat.completion.chunk',
    created: c.created ?? Math.floor(Date.now() / 1000),
    model: c.model ?? '',
    ...(c.fingerprint !== undefined ? { system_fingerprint: c.fingerprint } : {}),
  }
  const indexes = c.indexes.size === 0 ? [0] : [...c.indexes].sort((a, b) => a - b)
  const choices = indexes.map((index) => ({ index, delta: {}, logprobs: null, finish_reason: 'length' }))
  let out = `data: ${JSON.stringify({ ...head, choices, ...(usage ? { usage: null } : {}) })}\n\n`
  if (usage) {
    const u = { prompt_tokens: usage.prompt, completion_tokens: usage.completion, total_tokens: usage.prompt + usage.completion }
    out += `data: ${JSON.stringify({ ...head, choices: [], usage: u })}\n\n`
  }
  return `${out}data: [DONE]\n\n`
}

export function chatError(message: string, usage: CutUsage | undefined, kind: ErrorKind): string {
  const u = usage
    ? { usage: { prompt_tokens: usage.prompt, completion_tokens: usage.completion, total_tokens: usage.prompt + usage.completion } }
    : {}
  return `data: ${JSON.stringify({ error: { message, type: kind.openai, param: null, code: kind.code }, ...u })}\n\n`
}
