/**
 * Streams of one long tool call in the recorded shapes of each API (as
 * test/fixtures/llm/ records them: Chat Completions `delta.tool_calls`,
 * Anthropic `tool_use` with `input_json_delta`, the Responses API's
 * `function_call` item with `response.function_call_arguments.delta`), the
 * arguments sent `step` characters an event, as the APIs send a token or a
 * few at a time. Each begins with a short text (under 10 tokens) and ends as
 * the API ends a turn that calls a tool, with its usage.
 */

/** The tool every stream calls, and its JSON schema. */
export const TOOL = 'write_file'
export const TOOL_SCHEMA = {
  type: 'object' as const,
  properties: { path: { type: 'string' as const }, content: { type: 'string' as const } },
  required: ['path', 'content'],
  additionalProperties: false as const,
}

/** A tool call's arguments of about `chars` characters: a file's path and its text. */
export function toolArgs(chars: number): string {
  const line = 'Rate limits keep shared model capacity fair for every tenant. '
  return JSON.stringify({ path: 'notes/limits.md', content: line.repeat(Math.ceil(chars / line.length)).slice(0, chars) })
}

const TEXT = 'Writing it.'

function pieces(s: string, step: number): string[] {
  const out: string[] = []
  for (let i = 0; i < s.length; i += step) out.push(s.slice(i, i + step))
  return out
}

const sse = (data: object, name?: string): string => `${name === undefined ? '' : `event: ${name}\n`}data: ${JSON.stringify(data)}\n\n`

export function chatToolStream(args: string, step = 16): string {
  const head = { id: 'chatcmpl-tool', object: 'chat.completion.chunk', created: 1732406400, model: 'gpt-4o-2024-08-06' }
  const chunk = (delta: object, finish: string | null = null): string =>
    sse({ ...head, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }], usage: null })
  let out = chunk({ role: 'assistant', content: TEXT, refusal: null })
  out += chunk({ tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: TOOL, arguments: '' } }] })
  for (const p of pieces(args, step)) out += chunk({ tool_calls: [{ index: 0, function: { arguments: p } }] })
  out += chunk({}, 'tool_calls')
  const completion = Math.ceil((TEXT.length + args.length) / 4)
  out += sse({ ...head, choices: [], usage: { prompt_tokens: 64, completion_tokens: completion, total_tokens: 64 + completion } })
  return `${out}data: [DONE]\n\n`
}

export function messagesToolStream(args: string, step = 16): string {
  const ev = (name: string, data: object): string => sse({ type: name, ...data }, name)
  let out = ev('message_start', {
    message: {
      id: 'msg_tool',
      type: 'message',
      role: 'assistant',
      content: [],
      model: 'claude-sonnet-4-5-20250929',
      stop_reason: null,
      stop_sequence: null,
      usage: { input_tokens: 64, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 1 },
    },
  })
  out += ev('content_block_start', { index: 0, content_block: { type: 'text', text: '' } })
  out += ev('content_block_delta', { index: 0, delta: { type: 'text_delta', text: TEXT } })
  out += ev('content_block_stop', { index: 0 })
  out += ev('content_block_start', { index: 1, content_block: { type: 'tool_use', id: 'toolu_1', name: TOOL, input: {} } })
  for (const p of pieces(args, step)) out += ev('content_block_delta', { index: 1, delta: { type: 'input_json_delta', partial_json: p } })
  out += ev('content_block_stop', { index: 1 })
  const completion = Math.ceil((TEXT.length + args.length) / 4)
  out += ev('message_delta', { delta: { stop_reason: 'tool_use', stop_sequence: null }, usage: { output_tokens: completion } })
  return out + ev('message_stop', {})
}

export function responsesToolStream(args: string, step = 16): string {
  let seq = 0
  const ev = (name: string, data: object): string => sse({ type: name, sequence_number: seq++, ...data }, name)
  const response = {
    id: 'resp_tool',
    object: 'response',
    created_at: 1741476542,
    status: 'in_progress',
    error: null,
    incomplete_details: null,
    model: 'gpt-4.1-2025-04-14',
    output: [] as object[],
    parallel_tool_calls: true,
    tool_choice: 'auto',
    tools: [],
    usage: null as object | null,
  }
  let out = ev('response.created', { response }) + ev('response.in_progress', { response })
  const item = { id: 'fc_1', type: 'function_call', status: 'in_progress', arguments: '', call_id: 'call_1', name: TOOL }
  out += ev('response.output_item.added', { output_index: 0, item })
  for (const p of pieces(args, step)) out += ev('response.function_call_arguments.delta', { item_id: 'fc_1', output_index: 0, delta: p })
  out += ev('response.function_call_arguments.done', { item_id: 'fc_1', output_index: 0, arguments: args })
  const done = { ...item, status: 'completed', arguments: args }
  out += ev('response.output_item.done', { output_index: 0, item: done })
  const completion = Math.ceil(args.length / 4)
  const usage = {
    input_tokens: 64,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: completion,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: 64 + completion,
  }
  return out + ev('response.completed', { response: { ...response, status: 'completed', output: [done], usage } })
}
