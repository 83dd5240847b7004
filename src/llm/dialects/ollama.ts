/**
 * Ollama's dialect for the lines the gateway writes into a stream (docs/llm.md Ollama): the
 * last object as Ollama ends a reply cut at `num_predict`, `"done": true` with
 * `done_reason: "length"` and the counts, shaped as the stream's chunks are (`message` for
 * `/api/chat`, `response` for `/api/generate`), with their `model` and a `created_at`; and
 * the error line Ollama sends mid-stream (`{"error":"…"}`). Also the body of a reject.
 */
import type { CutUsage } from './event-parts.js'
import type { StreamFacts } from './stream-facts.js'

export function ollamaClose(f: StreamFacts, usage: CutUsage | undefined): string {
  const p = f.provider
  const last = {
    model: p.model ?? '',
    created_at: p.createdAt ?? new Date().toISOString(),
    ...(p.generate ? { response: '' } : { message: { role: 'assistant', content: '' } }),
    done: true,
    done_reason: 'length',
    ...(usage ? { prompt_eval_count: usage.prompt, eval_count: usage.completion } : {}),
  }
  return `${JSON.stringify(last)}\n`
}

export function ollamaError(message: string): string {
  return `${JSON.stringify({ error: message })}\n`
}

export function ollamaReject(message: string): string {
  return JSON.stringify({ error: message })
}
