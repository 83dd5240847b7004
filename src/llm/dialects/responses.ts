/**
 * Responses API dialect for the events the gateway writes into a stream:
 * `response.incomplete` as the API ends a reply cut at max_output_tokens
 * (the whole response object streamed so far, `status: "incomplete"`,
 * `incomplete_details.reason: "max_output_tokens"`, usage, the next
 * sequence_number), and the `error` event. The error event also carries an
 * `error` object: that is what the OpenAI SDKs raise from a stream.
 */
import type { CutUsage, ErrorKind } from './event-parts.js'
import type { StreamFacts } from './stream-facts.js'

function usageOf(u: CutUsage): object {
  return {
    input_tokens: u.prompt,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: u.completion,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: u.prompt + u.completion,
  }
}

export function responsesClose(f: StreamFacts, usage: CutUsage | undefined): string {
  const base = f.response ?? { id: 'resp_fairvisor', object: 'response', created_at: Math.floor(Date.now() / 1000), model: '', output: [] }
  const output = Array.isArray(base.output)
    ? base.output.map((item: unknown) =>
        item !== null && typeof item === 'object' && (item as { status?: unknown }).status === 'in_progress'
          ? { ...item, status: 'incomplete' }
          : item,
      )
    : []
  const response = {
    ...base,
    status: 'incomplete',
    incomplete_details: { reason: 'max_output_tokens' },
    output,
    usage: usage ? usageOf(usage) : (base.usage ?? null),
  }
  f.sequence++
  return `event: response.incomplete\ndata: ${JSON.stringify({ type: 'response.incomplete', sequence_number: f.sequence, response })}\n\n`
}

export function responsesError(f: StreamFacts, message: string, kind: ErrorKind): string {
  f.sequence++
  const code = kind.code
  return `event: error\ndata: ${JSON.stringify({ type: 'error', code, message, param: null, sequence_number: f.sequence, error: { type: kind.openai, code, message, param: null } })}\n\n`
}
