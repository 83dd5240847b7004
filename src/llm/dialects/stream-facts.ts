/**
 * What the gateway must know of a stream to end it in the API's own dialect
 * (docs/behaviour.md §5 Streaming): which API it is (request path first, else
 * the events' shapes), the ids a closing chunk repeats, the Anthropic content
 * block left open, and for the Responses API the response object so far
 * (openai-node replaces its snapshot with the `response` of a terminal
 * event, so that object must carry the output already streamed). Only
 * streams the gateway may end with `graceful_close` keep the output.
 * Gemini, Bedrock and Ollama: by their paths (providers/paths.ts) or their
 * streams' framing, with their facts in provider-facts.ts.
 */
import type { Framing, FramingKind } from '../framings/framing.js'
import { isProviderApi, type ProviderApi, providerOfPath } from '../providers/paths.js'
import { ProviderFacts } from './provider-facts.js'

export type LlmApi = 'chat' | 'completions' | 'responses' | 'messages' | ProviderApi

/** The API a request path belongs to (undefined: not known by path; the events decide). */
export function apiOfPath(path: string): LlmApi | undefined {
  const q = path.indexOf('?')
  const p = q === -1 ? path : path.slice(0, q)
  if (p.endsWith('/chat/completions')) return 'chat'
  if (p.endsWith('/completions')) return 'completions'
  if (p.endsWith('/responses')) return 'responses'
  if (p.endsWith('/messages')) return 'messages'
  return providerOfPath(p)
}

type Obj = Record<string, unknown>
const isObj = (v: unknown): v is Obj => v !== null && typeof v === 'object' && !Array.isArray(v)

export class StreamFacts {
  api: LlmApi | undefined
  /** Chat Completions: id, model, created and system_fingerprint of the chunks, and the choice indexes seen. */
  readonly chat: { id?: unknown; model?: unknown; created?: unknown; fingerprint?: unknown; indexes: Set<number> } = { indexes: new Set() }
  /** Responses API: the response object so far and the last sequence_number. */
  response: Obj | undefined
  sequence = -1
  /** Anthropic Messages: the content block started and not stopped. */
  openBlock: number | undefined
  /** How the stream is framed: SSE unless the meter reads another framing (framings/). */
  framing: FramingKind = 'sse'
  /** Gemini, Bedrock and Ollama: what their closing events repeat. */
  readonly provider: ProviderFacts

  constructor(
    path: string,
    private readonly keepOutput: boolean,
  ) {
    this.api = apiOfPath(path)
    this.provider = new ProviderFacts(path)
  }

  /** The stream is framed as `f`, which only one API's streams are: its closing events are that API's. */
  framedAs(f: Framing): void {
    this.framing = f.kind
    this.api = f.api
  }

  observe(name: string | undefined, o: Obj): void {
    if (isProviderApi(this.api)) return this.provider.observe(this.api, name, o)
    const type = typeof o.type === 'string' ? o.type : name
    if (this.api === undefined && o.object === 'text_completion') this.api = 'completions'
    if (this.api === undefined)
      this.api = Array.isArray(o.choices)
        ? 'chat'
        : type?.startsWith('response.')
          ? 'responses'
          : type?.startsWith('message_') || type?.startsWith('content_block_')
            ? 'messages'
            : undefined
    if (Array.isArray(o.choices)) return this.chunk(o)
    if (typeof o.sequence_number === 'number') this.sequence = o.sequence_number
    if (type === 'content_block_start' && typeof o.index === 'number') this.openBlock = o.index
    else if (type === 'content_block_stop') this.openBlock = undefined
    else if (type?.startsWith('response.')) this.responseEvent(type, o)
  }

  private chunk(o: Obj): void {
    const c = this.chat
    c.id ??= o.id
    c.model ??= o.model
    c.created ??= o.created
    c.fingerprint ??= o.system_fingerprint
    for (const ch of o.choices as unknown[]) if (isObj(ch) && typeof ch.index === 'number') c.indexes.add(ch.index)
  }

  private responseEvent(type: string, o: Obj): void {
    if (isObj(o.response)) {
      this.response = o.response
      return
    }
    const out = this.response?.output
    if (!this.keepOutput || !Array.isArray(out)) return
    const at = typeof o.output_index === 'number' ? o.output_index : -1
    if ((type === 'response.output_item.added' || type === 'response.output_item.done') && isObj(o.item) && at >= 0) {
      out[at] = o.item
      return
    }
    const item = out[at] as Obj | undefined
    if (!isObj(item)) return
    const parts = item.content
    const ci = typeof o.content_index === 'number' ? o.content_index : -1
    if (
      (type === 'response.content_part.added' || type === 'response.content_part.done') &&
      Array.isArray(parts) &&
      isObj(o.part) &&
      ci >= 0
    )
      parts[ci] = o.part
    else if (type === 'response.output_text.delta' && Array.isArray(parts) && isObj(parts[ci]) && typeof o.delta === 'string') {
      const part = parts[ci] as Obj
      part.text = String(part.text ?? '') + o.delta
    } else if (type === 'response.function_call_arguments.delta' && typeof o.delta === 'string')
      item.arguments = String(item.arguments ?? '') + o.delta
  }
}
