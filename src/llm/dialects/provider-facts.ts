/**
 * What the closing events of Gemini, Bedrock and Ollama streams repeat (stream-facts.ts keeps
 * it beside the OpenAI and Anthropic facts): Gemini's `responseId`, `modelVersion` and the
 * candidates' indexes; the Bedrock content block open (Converse starts a text block with its
 * first `contentBlockDelta`, a tool-use block with `contentBlockStart`), and whether the
 * stream is InvokeModel's rather than Converse's; Ollama's `model`, `created_at`, and whether
 * the chunks are `/api/generate`'s (`response`) or `/api/chat`'s (`message`).
 */
import { isBedrockInvoke, pathOnly, type ProviderApi } from '../providers/paths.js'

type Obj = Record<string, unknown>
const isObj = (v: unknown): v is Obj => v !== null && typeof v === 'object' && !Array.isArray(v)

export class ProviderFacts {
  responseId: unknown
  modelVersion: unknown
  readonly candidates = new Set<number>()
  /** Bedrock: the content block started and not stopped. */
  block: number | undefined
  /** Bedrock: an InvokeModel stream (its events are the model's own, in `chunk` events). */
  readonly invoke: boolean
  model: unknown
  createdAt: unknown
  generate = false

  constructor(path: string) {
    this.invoke = isBedrockInvoke(pathOnly(path))
  }

  observe(api: ProviderApi, name: string | undefined, o: Obj): void {
    if (api === 'gemini') {
      this.responseId ??= o.responseId
      this.modelVersion ??= o.modelVersion
      const list = Array.isArray(o.candidates) ? o.candidates : []
      for (let i = 0; i < list.length; i++) {
        const c: unknown = list[i]
        this.candidates.add(isObj(c) && typeof c.index === 'number' ? c.index : i)
      }
    } else if (api === 'bedrock') {
      const at = o.contentBlockIndex
      if ((name === 'contentBlockStart' || name === 'contentBlockDelta') && typeof at === 'number') this.block = at
      else if (name === 'contentBlockStop') this.block = undefined
    } else {
      this.model ??= o.model
      if (o.created_at !== undefined) this.createdAt = o.created_at
      if (typeof o.response === 'string') this.generate = true
    }
  }
}
