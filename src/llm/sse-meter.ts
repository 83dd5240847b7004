/**
 * Reads an SSE response as it passes (docs/behaviour.md §5 Streaming): the
 * bytes are cut into events (sse-events.ts), each event is parsed whole
 * (eventsource-parser), each event's completion text (message text,
 * tool-call arguments, thinking, transcripts) adds its tokens (the rule's
 * tokenizer, else text-tokens.ts) and its audio its duration's, and
 * whenever the count crosses a multiple of a limit's buffer_tokens it is
 * compared with its max_completion_tokens. Events are passed on whole, as
 * soon as they end: the bytes of an event not yet ended are held, at most
 * `maxEventBytes` of them (FAIRVISOR_LLM_MAX_EVENT_BYTES). An event (or a
 * line) longer than that ends the stream before it, so a stream that ends
 * here always ends between events and the closing events the gateway
 * writes are read as events of their own. An enforcing limit passed ends
 * the stream after the event that went over; shadow limits report
 * `would_truncate` once and never cut. Reported usage is merged as it
 * comes, and what a closing event must repeat is kept in `facts`. A stream
 * framed otherwise (Ollama's NDJSON, Gemini's JSON array, Bedrock's event
 * stream: framings/) is cut into its frames and read by its framing instead,
 * and metered alike. A limit passed inside a tool call's arguments
 * (tool-blocks.ts) waits, when the cut is to close gracefully, for the call
 * to close, at most `toolCallGrace` more tokens
 * (FAIRVISOR_LLM_TOOL_CALL_GRACE_TOKENS): it ends right after the event that
 * closed it, else `tool_call_unclosed` (an error event).
 */
import { createParser, type EventSourceParser } from 'eventsource-parser'
import { StreamFacts } from './dialects/index.js'
import type { Framing } from './framings/framing.js'
import { EventEnds } from './sse-events.js'
import { textTokens } from './text-tokens.js'
import { ToolBlocks } from './tool-blocks.js'
import { collectUsage, deltaAudioTokens, deltaText, type Usage } from './usage.js'

/** FAIRVISOR_LLM_MAX_EVENT_BYTES' default: far above any event the LLM APIs send (a Responses API `response.completed` repeats the whole output). */
export const DEFAULT_MAX_EVENT_BYTES = 8 * 1024 * 1024

export interface CompletionLimit {
  maxCompletion: number
  bufferTokens: number
  /** False: shadow, or enforce_mid_stream off — report, never cut. */
  enforce: boolean
  /** Reported once when passed without cutting. */
  wouldTruncate(counted: number): void
}

/** FAIRVISOR_LLM_TOOL_CALL_GRACE_TOKENS' default: a long tool call's arguments (about 4 KB of JSON) finish past the limit. */
export const DEFAULT_TOOL_CALL_GRACE_TOKENS = 1024

/**
 * Why a stream ends at the gateway: an enforcing limit's max_completion_tokens passed, the limit
 * passed inside a tool call that did not close within the grace, an event past the bound, or a
 * frame that does not read (a checksum that fails).
 */
export type MeterEnd = 'max_completion_tokens' | 'tool_call_unclosed' | 'event_too_large' | 'unreadable'

export class SseMeter {
  /** Completion tokens counted from the stream's text. */
  counted = 0
  readonly usage: Usage = { prompt: undefined, completion: undefined }
  /** `[DONE]` seen. */
  done = false
  /**
   * The usage is the call's final one: it came in an event that ends the call's accounting (Chat
   * Completions' usage chunk, Groq's last chunk, `response.completed`, `message_delta`), not
   * Anthropic's `message_start` placeholder. It then wins over the count whenever the client left.
   */
  usageFinal = false
  /** The event being parsed is to be kept from the client (the usage chunk the gateway asked for). */
  private drop = false
  /** Set when the stream is to end right after the bytes the last `feed` returned. */
  ended: MeterEnd | undefined
  /** Why a frame did not read (`ended` is then `unreadable`). */
  failure: Error | undefined
  private readonly parser: EventSourceParser
  private readonly decoder = new TextDecoder()
  private readonly ends: { in(c: Buffer): number[] }
  private readonly blocks: number[]
  private readonly flagged: boolean[]
  private over = false
  /** Tool calls whose arguments are streaming (only when a cut may wait for them). */
  private readonly tools: ToolBlocks | undefined
  /** The count when the limit was passed inside a tool call. */
  private graceFrom: number | undefined
  /** Copies of the bytes of the event not yet ended, and their length. */
  private held: Buffer[] = []
  private heldBytes = 0

  readonly facts: StreamFacts

  /**
   * `path`: the request's, which names the API the closing events speak; `framing`: not SSE.
   * `count`: tokens of a delta's text (the rule's tokenizer, else the script-aware estimate);
   * `hideUsage`: the client did not ask for the usage chunk the gateway added to its request
   * (llm/stream-usage.ts); `toolCallGrace`: tokens a graceful cut waits for an open tool call
   * (undefined: it never waits).
   */
  constructor(
    private readonly limits: readonly CompletionLimit[],
    path = '',
    readonly maxEventBytes = DEFAULT_MAX_EVENT_BYTES,
    private readonly framing?: Framing,
    private readonly options: { count?: (text: string) => number; hideUsage?: boolean; toolCallGrace?: number } = {},
  ) {
    if (options.toolCallGrace !== undefined) this.tools = new ToolBlocks()
    this.blocks = limits.map(() => 0)
    this.flagged = limits.map(() => false)
    this.facts = new StreamFacts(
      path,
      limits.some((l) => l.enforce),
    )
    this.parser = createParser({ onEvent: (e) => this.event(e.event, e.data) })
    this.ends = framing === undefined ? new EventEnds() : { in: (c) => framing.frameEnds(c) }
    if (framing !== undefined) this.facts.framedAs(framing)
  }

  /** Feeds one chunk; returns the bytes to pass on now (the events it ended), undefined for none. Then see `ended`. */
  feed(chunk: Buffer): Buffer | undefined {
    if (this.ended !== undefined) return undefined
    const out: Buffer[] = []
    let start = 0
    for (const end of this.ends.in(chunk)) {
      if (this.heldBytes + end - start > this.maxEventBytes) return this.tooLarge(out)
      const part = chunk.subarray(start, end)
      const event = this.heldBytes === 0 ? part : Buffer.concat([...this.held, part])
      this.held = []
      this.heldBytes = 0
      try {
        this.parse(event)
      } catch (err) {
        // A frame that does not read is not passed on: the stream ends before it, after the ones that did.
        this.failure = err instanceof Error ? err : new Error(String(err))
        this.ended = 'unreadable'
        return joined(out)
      }
      if (this.drop) this.drop = false
      else out.push(event)
      start = end
      if (this.over && this.overEnd()) return joined(out)
    }
    if (start < chunk.length) {
      if (this.heldBytes + chunk.length - start > this.maxEventBytes) return this.tooLarge(out)
      this.held.push(Buffer.from(chunk.subarray(start))) // a copy: the chunk may be a view of a larger read buffer
      this.heldBytes += chunk.length - start
    }
    return joined(out)
  }

  /** At the stream's end: the bytes of an event the upstream never ended, passed on as they came (undefined: none). */
  rest(): Buffer | undefined {
    const out = joined(this.held)
    this.held = []
    this.heldBytes = 0
    return out
  }

  /** Tokens counted since the limit was passed inside a tool call (0: it was not). */
  get graceUsed(): number {
    return this.graceFrom === undefined ? 0 : this.counted - this.graceFrom
  }

  /** A limit is passed: whether the stream ends now (not inside a tool call, or past its grace), setting `ended`. */
  private overEnd(): boolean {
    if (this.tools === undefined || !this.tools.open) this.ended = 'max_completion_tokens'
    else {
      this.graceFrom ??= this.counted
      if (this.counted - this.graceFrom >= this.options.toolCallGrace!) this.ended = 'tool_call_unclosed'
    }
    return this.ended !== undefined
  }

  private tooLarge(out: Buffer[]): Buffer | undefined {
    this.ended = 'event_too_large'
    this.held = []
    this.heldBytes = 0
    return joined(out)
  }

  /** One whole event to the parser, which so never holds a byte between calls. */
  private parse(event: Buffer): void {
    if (this.framing !== undefined) return this.framing.read(event, (name, data) => this.event(name, data))
    this.parser.feed(this.decoder.decode(event))
    // A trailing CR is a whole line end here (the next byte is known not to be LF); the parser would wait for that byte.
    if (event[event.length - 1] === 13) this.parser.feed('\n')
  }

  private event(name: string | undefined, data: string): void {
    if (data === '[DONE]') {
      this.done = true
      return
    }
    let obj: unknown
    try {
      obj = JSON.parse(data)
    } catch {
      return
    }
    if (obj === null || typeof obj !== 'object') return
    const o = obj as Record<string, unknown>
    this.facts.observe(name, o)
    this.tools?.observe(name, o)
    if (collectUsage(o, this.usage)) {
      if (o.type !== 'message_start' && this.usage.prompt !== undefined && this.usage.completion !== undefined) this.usageFinal = true
      // The usage-only chunk of a client that did not ask for it: read, not passed on.
      if (this.options.hideUsage === true && Array.isArray(o.choices) && o.choices.length === 0) this.drop = true
    }
    const text = deltaText(o)
    const tokens = (text.length === 0 ? 0 : (this.options.count ?? textTokens)(text)) + deltaAudioTokens(o)
    if (tokens === 0) return
    this.counted += tokens
    for (let k = 0; k < this.limits.length; k++) {
      const l = this.limits[k]!
      const b = Math.floor(this.counted / l.bufferTokens)
      if (b === this.blocks[k]) continue
      this.blocks[k] = b
      if (this.counted <= l.maxCompletion) continue
      if (l.enforce) this.over = true
      else if (!this.flagged[k]) {
        this.flagged[k] = true
        l.wouldTruncate(this.counted)
      }
    }
  }
}

function joined(list: Buffer[]): Buffer | undefined {
  return list.length === 0 ? undefined : list.length === 1 ? list[0] : Buffer.concat(list)
}
