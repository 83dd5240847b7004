/**
 * How a stream that is not SSE is cut into frames (docs/llm.md, Providers), for the meter
 * (sse-meter.ts) to pass each frame on whole, hold at most one unfinished, and read it:
 * Ollama's NDJSON lines, Gemini's JSON array elements, Bedrock's binary event-stream
 * messages. SSE keeps its own (sse-events.ts). A leaf: the framings and the meter import it.
 */
import type { ProviderApi } from '../providers/paths.js'

export type FramingKind = 'sse' | 'ndjson' | 'json-array' | 'eventstream'

export interface Framing {
  readonly kind: Exclude<FramingKind, 'sse'>
  /** The API whose closing events such a stream takes (these framings each belong to one). */
  readonly api: ProviderApi
  /** The offsets in `c` just past each frame that ends in it, in order (state kept across chunks). Bytes that cannot be a frame end one, for `read` to refuse. */
  frameEnds(c: Buffer): number[]
  /** One whole frame: each event it carries, as its name (if it has one) and its JSON text. Throws on a frame that does not read: the stream ends before it. */
  read(frame: Buffer, emit: (name: string | undefined, data: string) => void): void
}
