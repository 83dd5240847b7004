/**
 * Legacy completions' (`/v1/completions`) dialect for the events the gateway
 * writes into a stream it cuts: a `text_completion` chunk with each choice's
 * `text: ""` and `finish_reason: "length"` (as the API ends a reply cut at
 * max_tokens), the usage chunk as stream_options.include_usage sends it, then
 * `[DONE]`. Its error event is Chat Completions' (`{"error":{…}}`).
 */
import type { CutUsage } from './event-parts.js'
import type { StreamFacts } from './stream-facts.js'

export function completionsClose(f: StreamFacts, usage: CutUsage | undefined): string {
  const c = f.chat
  const head = {
    id: c.id ?? 'cmpl-fairvisor',
    object: 'text_completion',
    created: c.created ?? Math.floor(Date.now() / 1000),
    model: c.model ?? '',
    ...(c.fingerprint !== undefined ? { system_fingerprint: c.fingerprint } : {}),
  }
  const indexes = c.indexes.size === 0 ? [0] : [...c.indexes].sort((a, b) => a - b)
  const choices = indexes.map((index) => ({ text: '', index, logprobs: null, finish_reason: 'length' }))
  let out = `data: ${JSON.stringify({ ...head, choices })}\n\n`
  if (usage) {
    const u = { prompt_tokens: usage.prompt, completion_tokens: usage.completion, total_tokens: usage.prompt + usage.completion }
    out += `data: ${JSON.stringify({ ...head, choices: [], usage: u })}\n\n`
  }
  return `${out}data: [DONE]\n\n`
}
