/**
 * Legacy completions' (`/v1/completions`) dialect for the events the gateway
 * writes into a stream it cuts: a `text_completion` chunk with each choice's
 * `text: ""` and `finish_reason: "length"` (as the API ends a reply cut at
 * max_tokens), the usage chunk as stream_options.include_usage sends it, then
 * `[DONE]`. Its error event is Chat Completions' (`{"error":{…}}`).
 */
import { type CloseShape, openAiClose } from './chat.js'
import type { CutUsage } from './event-parts.js'
import type { StreamFacts } from './stream-facts.js'

const COMPLETIONS_SHAPE: CloseShape = {
  idFallback: 'cmpl-fairvisor',
  object: 'text_completion',
  choice: (index) => ({ text: '', index, logprobs: null, finish_reason: 'length' }),
  usageNull: false,
}

export const completionsClose = (f: StreamFacts, usage: CutUsage | undefined): string => openAiClose(f, usage, COMPLETIONS_SHAPE)
