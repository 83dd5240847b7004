/**
 * Every part of an LLM request body the upstream bills as input
 * (docs/behaviour.md §5 Estimates), for every estimator alike:
 *   - `messages[].content` in each form: a string, text parts, tool results
 *     (their content), other parts (tool_use, documents) as their JSON text;
 *     `tool_calls` / `function_call` of assistant messages as JSON text;
 *   - images (`image_url`, `image`, `input_image` parts) at a fixed
 *     IMAGE_TOKENS each, never as the length of their base64 data;
 *   - `system` (string or content blocks), `instructions`;
 *   - `prompt` (string, array of strings, or token ids: one token each);
 *   - `input` (Responses API and embeddings: a string, strings, or items);
 *   - `tools`, `functions`, `tool_choice`: their JSON text (the upstream
 *     renders them into the prompt);
 *   - Gemini: `contents[].parts` and `systemInstruction` (text parts, function calls and
 *     responses as JSON text, `inlineData` / `fileData` as media), `toolConfig`; Bedrock
 *     Converse: content blocks as above (`image` / `video` blocks as media), `toolConfig`;
 *     Ollama: `images` (of a message, or of `/api/generate`) as media, `suffix`.
 * A client cannot move its prompt to a field the estimate does not read.
 */

/** Tokens charged per image part: providers bill 85–1,600 by size and detail; the settlement corrects the rest. */
export const IMAGE_TOKENS = 1000

export interface PromptParts {
  texts: string[]
  /** Messages / input items (each costs a few framing tokens). */
  messages: number
  images: number
  /** Tokens given as ids (`prompt: [1, 2, 3]`). */
  tokenIds: number
  /** Whether any billed field was present (else the body is estimated from its size). */
  found: boolean
}

const IMAGE_TYPES = new Set(['image_url', 'image', 'input_image'])

/** A media part of Gemini (`inlineData`, `fileData`) or a Bedrock media block (`image`, `video`): billed by size, not as base64. */
const isMedia = (o: Record<string, unknown>): boolean =>
  (o.inlineData ?? o.inline_data ?? o.fileData ?? o.file_data ?? o.image ?? o.video) !== undefined && o.text === undefined

function part(p: unknown, out: PromptParts): void {
  if (typeof p === 'string') return void out.texts.push(p)
  if (typeof p === 'number') return void out.tokenIds++
  if (p === null || typeof p !== 'object') return
  if (Array.isArray(p)) {
    for (const x of p) part(x, out)
    return
  }
  const o = p as Record<string, unknown>
  if ((typeof o.type === 'string' && IMAGE_TYPES.has(o.type)) || isMedia(o)) return void out.images++
  if (typeof o.text === 'string') out.texts.push(o.text)
  else if (o.content !== undefined)
    part(o.content, out) // tool_result, nested blocks
  else if (Array.isArray(o.parts))
    part(o.parts, out) // a Gemini Content
  else if (typeof o.output === 'string')
    out.texts.push(o.output) // Responses function_call_output
  else out.texts.push(JSON.stringify(o)) // tool_use, function_call, documents: billed as their text
}

function message(m: unknown, out: PromptParts): void {
  out.messages++
  if (m === null || typeof m !== 'object' || Array.isArray(m)) return part(m, out)
  const o = m as Record<string, unknown>
  if (o.content !== undefined && o.content !== null) part(o.content, out)
  else if (o.type !== undefined) part(o, out) // a Responses item that is not a message
  if (o.tool_calls !== undefined) out.texts.push(JSON.stringify(o.tool_calls))
  if (o.function_call !== undefined) out.texts.push(JSON.stringify(o.function_call))
  if (Array.isArray(o.images)) out.images += o.images.length // Ollama
}

const jsonFields = ['tools', 'functions', 'tool_choice', 'toolConfig', 'tool_config'] as const

export function promptParts(json: Record<string, unknown>): PromptParts {
  const out: PromptParts = { texts: [], messages: 0, images: 0, tokenIds: 0, found: false }
  if (Array.isArray(json.messages)) for (const m of json.messages) message(m, out)
  if (Array.isArray(json.input)) for (const m of json.input) message(m, out)
  else part(json.input, out)
  part(json.system, out)
  part(json.instructions, out)
  part(json.prompt, out)
  // Gemini's contents and system instruction; Ollama's /api/generate suffix and images.
  if (Array.isArray(json.contents)) for (const c of json.contents) message({ content: c }, out)
  part(json.systemInstruction ?? json.system_instruction, out)
  part(json.suffix, out)
  if (Array.isArray(json.images)) out.images += json.images.length
  for (const f of jsonFields) if (json[f] !== undefined && json[f] !== null) out.texts.push(JSON.stringify(json[f]))
  out.found = out.messages > 0 || out.texts.length > 0 || out.images > 0 || out.tokenIds > 0
  return out
}
