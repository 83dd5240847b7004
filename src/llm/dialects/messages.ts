/**
 * Anthropic Messages dialect for the events the gateway writes into a
 * stream, each with its `event:` line (the Anthropic SDKs skip data-only
 * events): `content_block_stop` for a block left open, `message_delta` with
 * `stop_reason: "max_tokens"` and usage (the SDKs read `usage.output_tokens`
 * from every message_delta), `message_stop`; and the `error` event.
 */
import type { CutUsage, ErrorKind } from './event-parts.js'
import type { StreamFacts } from './stream-facts.js'

const event = (name: string, data: object): string => `event: ${name}\ndata: ${JSON.stringify({ type: name, ...data })}\n\n`

export function messagesClose(f: StreamFacts, counted: number, usage: CutUsage | undefined): string {
  let out = f.openBlock === undefined ? '' : event('content_block_stop', { index: f.openBlock })
  f.openBlock = undefined
  out += event('message_delta', {
    delta: { stop_reason: 'max_tokens', stop_sequence: null },
    usage: usage ? { input_tokens: usage.prompt, output_tokens: usage.completion } : { output_tokens: counted },
  })
  return out + event('message_stop', {})
}

export function messagesError(message: string, kind: ErrorKind): string {
  return event('error', { error: { type: kind.anthropic, message } })
}
