/**
 * The events the gateway writes when it ends a stream at
 * max_completion_tokens, in the dialect of the API the stream speaks
 * (docs/behaviour.md §5 Streaming): `graceful_close` ends it as the API ends
 * a reply cut at its own token limit, `error_chunk` with the API's error
 * event. The same error event, as a server error, ends a stream the
 * upstream broke. Also the body of an LLM reject in the API's error shape.
 * Gemini, Bedrock (binary event-stream messages) and Ollama have theirs too.
 */
import { bedrockClose, bedrockError, bedrockReject } from './bedrock.js'
import { chatClose, chatError } from './chat.js'
import { completionsClose } from './completions.js'
import type { CutUsage, ErrorKind } from './event-parts.js'
import { geminiClose, geminiError, geminiReject } from './gemini.js'
import { messagesClose, messagesError } from './messages.js'
import { ollamaClose, ollamaError, ollamaReject } from './ollama.js'
import { responsesClose, responsesError } from './responses.js'
import { apiOfPath, type StreamFacts } from './stream-facts.js'

export { StreamFacts, apiOfPath, type LlmApi } from './stream-facts.js'

const CUT_ERROR: ErrorKind = { openai: 'rate_limit_error', anthropic: 'rate_limit_error', code: 'completion_tokens_exceeded' }

const CUT_MESSAGE = 'max completion tokens exceeded'

/** The error event's message when the limit was passed inside a tool call that did not end within its grace. */
export const TOOL_CALL_CUT_MESSAGE =
  'max completion tokens exceeded inside a tool call whose arguments did not end within FAIRVISOR_LLM_TOOL_CALL_GRACE_TOKENS'

/** The bytes that end a cut stream. `usage` undefined: include_partial_usage is off; `message`: an error event's. */
export function closingEvents(
  f: StreamFacts,
  action: 'graceful_close' | 'error_chunk',
  counted: number,
  usage: CutUsage | undefined,
  message = CUT_MESSAGE,
): string | Buffer {
  switch (f.api) {
    case 'responses':
      return action === 'error_chunk' ? responsesError(f, message, CUT_ERROR) : responsesClose(f, usage)
    case 'messages':
      return action === 'error_chunk' ? messagesError(message, CUT_ERROR) : messagesClose(f, counted, usage)
    case 'completions':
      return action === 'error_chunk' ? chatError(message, usage, CUT_ERROR) : completionsClose(f, usage)
    case 'gemini':
      return action === 'error_chunk' ? geminiError(f, message, CUT_ERROR) : geminiClose(f, usage)
    case 'bedrock':
      return action === 'error_chunk' ? bedrockError(message, CUT_ERROR) : bedrockClose(f, CUT_MESSAGE, usage)
    case 'ollama':
      return action === 'error_chunk' ? ollamaError(message) : ollamaClose(f, usage)
    default:
      return action === 'error_chunk' ? chatError(message, usage, CUT_ERROR) : chatClose(f, usage)
  }
}

/** The API's error event ending a stream the upstream broke (as the APIs report their own server errors mid-stream). */
export function upstreamErrorEvent(f: StreamFacts, message: string, code: string): string | Buffer {
  const kind: ErrorKind = { openai: 'server_error', anthropic: 'api_error', code }
  switch (f.api) {
    case 'responses':
      return responsesError(f, message, kind)
    case 'messages':
      return messagesError(message, kind)
    case 'gemini':
      return geminiError(f, message, kind)
    case 'bedrock':
      return bedrockError(message, kind)
    case 'ollama':
      return ollamaError(message)
    default:
      return chatError(message, undefined, kind)
  }
}

/**
 * The body of an LLM reject (or, `invalid`, of a request refused as malformed or too large for its
 * rule, with `code` the reason when there is one; `ended`, of a reject answered 403 because it
 * cannot pass within FAIRVISOR_LLM_MAX_RETRY_AFTER): Anthropic's error shape on Messages paths,
 * Google's on Gemini's (INVALID_ARGUMENT, PERMISSION_DENIED or RESOURCE_EXHAUSTED, as the status
 * says), Bedrock's on its own (ValidationException, ServiceQuotaExceededException or
 * ThrottlingException: the AWS SDK retries a ThrottlingException whatever the status) and
 * Ollama's on its own, OpenAI's elsewhere (their SDKs read these). docs/llm.md "Rejects that end".
 */
export function rejectBody(path: string | undefined, message: string, invalid = false, code?: string, ended = false): string {
  const type = invalid ? 'invalid_request_error' : 'rate_limit_error'
  const api = path === undefined ? undefined : apiOfPath(path)
  if (api === 'messages') return JSON.stringify({ type: 'error', error: { type, message } })
  if (api === 'gemini') return geminiReject(message, invalid ? 'invalid' : ended ? 'ended' : CUT_ERROR)
  if (api === 'bedrock') return bedrockReject(message, invalid ? 'invalid' : ended ? 'ended' : 'limit')
  if (api === 'ollama') return ollamaReject(message)
  return JSON.stringify({ error: { message, type, param: null, code: code ?? (invalid ? null : 'rate_limit_exceeded') } })
}
