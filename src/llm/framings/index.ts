/**
 * The framing of a response the meter reads that is not SSE (docs/llm.md, Providers), from
 * its status, Content-Type and the request path: Bedrock's event stream, Ollama's NDJSON,
 * Gemini's JSON array (a successful JSON answer to `:streamGenerateContent`; an error is one
 * JSON object). undefined: SSE (text/event-stream), or an answer that is not a stream (JSON is
 * then kept for its usage).
 */
import { isGeminiStream, pathOnly } from '../providers/paths.js'
import { EventStreamFraming } from './eventstream.js'
import type { Framing } from './framing.js'
import { JsonArrayFraming } from './json-array.js'
import { NdjsonFraming } from './ndjson.js'

export type { Framing, FramingKind } from './framing.js'

export function streamFraming(status: number, contentType: string | undefined, path: string): Framing | undefined {
  if (contentType === undefined) return undefined
  if (contentType.includes('application/vnd.amazon.eventstream')) return new EventStreamFraming()
  if (contentType.includes('ndjson')) return new NdjsonFraming()
  if (status < 300 && contentType.includes('json') && isGeminiStream(pathOnly(path))) return new JsonArrayFraming()
  return undefined
}
