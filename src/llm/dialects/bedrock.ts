/**
 * Bedrock's dialect for the events the gateway writes into a stream (docs/llm.md Bedrock),
 * as event-stream messages (framings/eventstream.ts): a Converse stream cut at its output
 * cap ends as Bedrock ends one at `maxTokens`: `contentBlockStop` for the block left open,
 * `messageStop` with `stopReason: "max_tokens"`, and the `metadata` event with `usage` and
 * `metrics`; the AWS SDK's ConverseStreamCommand yields them as such. An InvokeModel stream
 * carries the model's own events, which differ per model: it ends with a
 * `modelStreamErrorException`. Errors are exception messages (`throttlingException`, or
 * `internalServerException` for a stream the upstream broke), which the SDK throws. A
 * reject names its error type in `__type` and in `x-amzn-ErrorType`, where the SDK reads it.
 */
import { eventMessage } from '../framings/eventstream.js'
import type { CutUsage, ErrorKind } from './event-parts.js'
import type { StreamFacts } from './stream-facts.js'

export function bedrockClose(f: StreamFacts, message: string, usage: CutUsage | undefined): Buffer {
  const p = f.provider
  if (p.invoke) return eventMessage('modelStreamErrorException', { message, originalStatusCode: 429, originalMessage: message }, true)
  const out: Buffer[] = []
  if (p.block !== undefined) out.push(eventMessage('contentBlockStop', { contentBlockIndex: p.block }))
  p.block = undefined
  out.push(eventMessage('messageStop', { stopReason: 'max_tokens' }))
  if (usage)
    out.push(
      eventMessage('metadata', {
        usage: { inputTokens: usage.prompt, outputTokens: usage.completion, totalTokens: usage.prompt + usage.completion },
        metrics: { latencyMs: 0 },
      }),
    )
  return Buffer.concat(out)
}

export function bedrockError(message: string, kind: ErrorKind): Buffer {
  return eventMessage(kind.openai === 'server_error' ? 'internalServerException' : 'throttlingException', { message }, true)
}

/** The error type a reject's body (and its x-amzn-ErrorType header) names. */
export function bedrockErrorType(kind: 'limit' | 'invalid' | 'ended'): string {
  return kind === 'invalid' ? 'ValidationException' : kind === 'ended' ? 'ServiceQuotaExceededException' : 'ThrottlingException'
}

export function bedrockReject(message: string, kind: 'limit' | 'invalid' | 'ended'): string {
  return JSON.stringify({ __type: bedrockErrorType(kind), message })
}
