/**
 * Ollama's native API (`/api/chat`, `/api/generate`, `/api/embed`; docs/llm.md Ollama): its
 * usage, on the last object of an answer (`"done": true`): `prompt_eval_count` and
 * `eval_count`, which Ollama leaves out when zero (a prompt served from its cache), and on an
 * `/api/embed` answer `prompt_eval_count` alone; a model's details (`/api/show`) use no tokens.
 * The completion text of a chunk (`message.content`, `message.thinking`, tool calls as their
 * JSON text; `/api/generate`: `response`, `thinking`), and the output cap a request asks for
 * (`options.num_predict`; -1 and -2, no cap and fill the context, are none).
 */
import type { Usage } from '../usage.js'
import { count, isObj, type Obj, positiveCap } from './json-values.js'

const str = (v: unknown): string => (typeof v === 'string' ? v : '')

/** Usage of an Ollama answer object; false when `o` is none of its shapes. */
export function ollamaUsage(o: Obj, into: Usage): boolean {
  if (o.done === true && typeof o.model === 'string') {
    into.prompt = count(o.prompt_eval_count) ?? 0
    into.completion = count(o.eval_count) ?? 0
    return true
  }
  if (typeof o.model === 'string' && Array.isArray(o.embeddings)) {
    into.prompt = count(o.prompt_eval_count) ?? 0
    return true
  }
  if (o.modelfile !== undefined && o.model_info !== undefined) {
    into.prompt = 0
    into.completion = 0
    return true
  }
  return false
}

/** The text a chunk (an object with a boolean `done`) adds to the completion. */
export function ollamaText(o: Obj): string {
  const m = o.message
  if (isObj(m)) return str(m.content) + str(m.thinking) + (m.tool_calls === undefined ? '' : JSON.stringify(m.tool_calls))
  return str(o.response) + str(o.thinking)
}

/** options.num_predict when positive. */
export function ollamaCap(json: Obj): number | undefined {
  const o = json.options
  if (!isObj(o)) return undefined
  return positiveCap(o.num_predict)
}
