/**
 * Chat Completions' dialect for the events the gateway writes into a stream:
 * the closing chunk as OpenAI ends a reply cut at max_tokens (each choice
 * with `finish_reason: "length"`), the usage chunk as OpenAI sends it with
 * stream_options.include_usage, then `[DONE]`; and the error event
 * (`{"error":{…}}`, which the OpenAI SDKs raise as an API error).
 */
import type { CutUsage, ErrorKind } from './event-parts.js'
import type { StreamFacts } from './stream-facts.js'

/** How Chat Completions and legacy completions differ in the chunks that close a stream. */
export interface CloseShape {
  readonly idFallback: string
  readonly object: string
  readonly choice: (index: number) => object
  /** Chat Completions marks the closing chunk `usage: null` when a usage chunk follows; legacy completions do not. */
  readonly usageNull: boolean
}

const CHAT_SHAPE: CloseShape = {
  idFallback: 'chatcmpl-fairvisor',
  object: 'chat.completion.chunk',
  choice: (index) => ({ index, delta: {}, logprobs: null, finish_reason: 'length' }),
  usageNull: true,
}

/** OpenAI's usage object from a cut's counts. */
const openAiUsage = (u: CutUsage) => ({ prompt_tokens: u.prompt, completion_tokens: u.completion, total_tokens: u.prompt + u.completion })

/** The closing chunk (each choice ended `finish_reason: "length"`), the usage chunk when there is usage, then `[DONE]`. */
export function openAiClose(f: StreamFacts, usage: CutUsage | undefined, shape: CloseShape): string {
  const c = f.chat
  const head = {
    id: c.id ?? shape.idFallback,
    object: shape.object,
    created: c.created ?? Math.floor(Date.now() / 1000),
    model: c.model ?? '',
    ...(c.fingerprint !== undefined ? { system_fingerprint: c.fingerprint } : {}),
  }
  const indexes = c.indexes.size === 0 ? [0] : [...c.indexes].sort((a, b) => a - b)
  const choices = indexes.map(shape.choice)
  let out = `data: ${JSON.stringify({ ...head, choices, ...(usage && shape.usageNull ? { usage: null } : {}) })}\n\n`
  if (usage) out += `data: ${JSON.stringify({ ...head, choices: [], usage: openAiUsage(usage) })}\n\n`
  return `${out}data: [DONE]\n\n`
}

export const chatClose = (f: StreamFacts, usage: CutUsage | undefined): string => openAiClose(f, usage, CHAT_SHAPE)

export function chatError(message: string, usage: CutUsage | undefined, kind: ErrorKind): string {
  const u = usage ? { usage: openAiUsage(usage) } : {}
  return `data: ${JSON.stringify({ error: { message, type: kind.openai, param: null, code: kind.code }, ...u })}\n\n`
}
