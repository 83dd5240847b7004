/**
 * Gemini's dialect for the events the gateway writes into a stream (docs/llm.md Gemini): the
 * closing chunk as Gemini ends a reply cut at maxOutputTokens (each candidate with
 * `finishReason: "MAX_TOKENS"` and an empty text part, `usageMetadata`, the stream's
 * `modelVersion` and `responseId`), and the error Gemini sends mid-stream, a bare
 * `{"error":{code,message,status}}` that `@google/genai` raises as an `ApiError`. In an SSE
 * stream (`alt=sse`) the chunk is a `data:` event; in the JSON array stream it is the array's
 * last element, and the array is closed. Also the body of a reject, in Google's error shape.
 */
import type { CutUsage, ErrorKind } from './event-parts.js'
import type { StreamFacts } from './stream-facts.js'

function framed(f: StreamFacts, json: string, event: boolean): string {
  if (f.framing === 'json-array') return `,\r\n${json}\n]`
  return event ? `data: ${json}\r\n\r\n` : `${json}\n`
}

export function geminiClose(f: StreamFacts, usage: CutUsage | undefined): string {
  const p = f.provider
  const indexes = p.candidates.size === 0 ? [0] : [...p.candidates].sort((a, b) => a - b)
  const chunk = {
    candidates: indexes.map((index) => ({ content: { parts: [{ text: '' }], role: 'model' }, finishReason: 'MAX_TOKENS', index })),
    ...(usage
      ? {
          usageMetadata: {
            promptTokenCount: usage.prompt,
            candidatesTokenCount: usage.completion,
            totalTokenCount: usage.prompt + usage.completion,
          },
        }
      : {}),
    ...(p.modelVersion !== undefined ? { modelVersion: p.modelVersion } : {}),
    ...(p.responseId !== undefined ? { responseId: p.responseId } : {}),
  }
  return framed(f, JSON.stringify(chunk), true)
}

/**
 * Google's error object: a server error (500 INTERNAL), a limit (429 RESOURCE_EXHAUSTED), a request
 * too large for its rule (400 INVALID_ARGUMENT) or a reject that cannot pass soon (403 PERMISSION_DENIED).
 */
function googleError(message: string, kind: ErrorKind | 'invalid' | 'ended'): string {
  const [code, status] =
    kind === 'invalid'
      ? [400, 'INVALID_ARGUMENT']
      : kind === 'ended'
        ? [403, 'PERMISSION_DENIED']
        : kind.openai === 'server_error'
          ? [500, 'INTERNAL']
          : [429, 'RESOURCE_EXHAUSTED']
  return JSON.stringify({ error: { code, message, status } })
}

export function geminiError(f: StreamFacts, message: string, kind: ErrorKind): string {
  return framed(f, googleError(message, kind), false)
}

export function geminiReject(message: string, kind: ErrorKind | 'invalid' | 'ended'): string {
  return googleError(message, kind)
}
