/**
 * Asking an OpenAI-compatible API for a stream's usage (docs/llm.md "Counting"):
 * Chat Completions and legacy completions report a stream's usage only when the
 * request says `stream_options: {"include_usage": true}`, which most clients do
 * not (the AI SDK's OpenAI-compatible provider, LangChain's defaults), so their
 * streams would settle on the gateway's own count. With
 * FAIRVISOR_LLM_STREAM_USAGE (on by default) the gateway adds it to a streaming
 * request that has no `stream_options` at all, and keeps the usage chunk it
 * brings from the client (llm/sse-meter.ts `hideUsage`). The body is changed by
 * inserting the member after its opening brace, every other byte as the client
 * sent it; only a body held whole (its first MiB, read for the decision) is
 * changed. A request with `stream_options` of its own is left as it is.
 */
import { truthyStream } from './request-body.js'

const MEMBER = Buffer.from('"stream_options":{"include_usage":true},')

/** Paths of the APIs that take stream_options (Azure's and Gemini's OpenAI-compatible ones end the same way). */
function takesStreamOptions(path: string): boolean {
  const q = path.indexOf('?')
  const p = q === -1 ? path : path.slice(0, q)
  return p.endsWith('/chat/completions') || p.endsWith('/completions')
}

/** The body to send instead of `body` (undefined: send it as it is). `whole`: `body` is the entire request body. */
export function withStreamUsage(body: Buffer, whole: boolean, path: string): Buffer | undefined {
  if (!whole || !takesStreamOptions(path) || !body.includes('"stream"')) return undefined
  let json: unknown
  try {
    json = JSON.parse(body.toString('utf8'))
  } catch {
    return undefined
  }
  if (json === null || typeof json !== 'object' || Array.isArray(json)) return undefined
  const o = json as Record<string, unknown>
  if (!truthyStream(o.stream) || o.stream_options !== undefined) return undefined
  const open = body.indexOf('{')
  return Buffer.concat([body.subarray(0, open + 1), MEMBER, body.subarray(open + 1)])
}
