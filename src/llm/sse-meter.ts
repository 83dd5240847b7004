/**
 * Reads an SSE response as it passes (docs/behaviour.md §5 Streaming): events are parsed
 * incrementally (eventsource-parser), each event's completion text (message
 * text, tool-call arguments, thinking) adds ceil(characters / 4) tokens, and whenever the count crosses a multiple of a
 * limit's buffer_tokens it is compared with its max_completion_tokens. The
 * chunk is never held: `feed` only says where to cut it (after the event
 * that went over) when an enforcing limit is passed; shadow limits report
 * `would_truncate` once and never cut. Reported usage is merged as it comes,
 * and what a closing event must repeat is kept in `facts`.
 */
import { createParser, type EventSourceParser } from 'eventsource-parser'
import { StreamFacts } from './dialects/index.js'
import { collectUsage, deltaText, type Usage } from './usage.js'

export interface CompletionLimit {
  maxCompletion: number
  bufferTokens: number
  /** False: shadow, or enforce_mid_stream off — report, never cut. */
  enforce: boolean
  /** Reported once when passed without cutting. */
  wouldTruncate(counted: number): void
}

export class SseMeter {
  /** Completion tokens counted from the stream's text. */
  counted = 0
  readonly usage: Usage = { prompt: undefined, completion: undefined }
  /** `[DONE]` seen. */
  done = false
  private readonly parser: EventSourceParser
  private readonly decoder = new TextDecoder()
  private readonly blocks: number[]
  private readonly flagged: boolean[]
  private over = false
  /** Absolute offset of the last `\n` seen, and the byte before the current chunk. */
  private lastNl = -3
  private offset = 0
  private lastByte = 0

  readonly facts: StreamFacts

  /** `path`: the request's, which names the API the closing events speak. */
  constructor(
    private readonly limits: readonly CompletionLimit[],
    path = '',
  ) {
    this.blocks = limits.map(() => 0)
    this.flagged = limits.map(() => false)
    this.facts = new StreamFacts(
      path,
      limits.some((l) => l.enforce),
    )
    this.parser = createParser({ onEvent: (e) => this.event(e.event, e.data) })
  }

  /** Feeds one chunk; returns -1 to pass it whole, or the byte offset after which the stream is to end. */
  feed(chunk: Buffer): number {
    let segStart = 0
    let from = 0
    for (;;) {
      const i = chunk.indexOf(10, from)
      if (i === -1) break
      const abs = this.offset + i
      const prev = i > 0 ? chunk[i - 1] : this.lastByte
      // A blank line (\n\n or \r\n\r\n) ends an event: feed up to it, so a cut falls between events.
      const blank = this.lastNl === abs - 1 || (prev === 13 && this.lastNl === abs - 2)
      this.lastNl = abs
      from = i + 1
      if (blank) {
        this.parser.feed(this.decoder.decode(chunk.subarray(segStart, i + 1), { stream: true }))
        segStart = i + 1
        if (this.over) return i + 1
      }
    }
    if (segStart < chunk.length) this.parser.feed(this.decoder.decode(chunk.subarray(segStart), { stream: true }))
    this.offset += chunk.length
    this.lastByte = chunk[chunk.length - 1] ?? this.lastByte
    return this.over ? chunk.length : -1
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
    this.facts.observe(name, obj as Record<string, unknown>)
    collectUsage(obj, this.usage)
    const text = deltaText(obj)
    if (text.length === 0) return
    this.counted += Math.ceil(text.length / 4)
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
