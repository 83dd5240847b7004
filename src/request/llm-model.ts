/**
 * `llm:model` (docs/descriptors.md "The model"): the model the upstream runs the call on, read
 * where the API of the path reads it, never where it does not, so that a client cannot name a
 * cheap model to the gateway and an expensive one to the upstream:
 * - Azure OpenAI deployments (`/openai/deployments/{deployment}/…`): the deployment (Azure
 *   ignores the body's `model`);
 * - Gemini and Vertex AI (`…/models/{model}:generateContent` and every other `:method`, and
 *   `…/tunedModels/{model}:…`): the model of the path;
 * - AWS Bedrock (`/model/{modelId}/converse`, `/converse-stream`, `/invoke`,
 *   `/invoke-with-response-stream`): the model id, percent-decoded as Bedrock decodes it;
 * - the Realtime API (`…/realtime`, a WebSocket upgrade with no body): the query's `model`
 *   (OpenAI) or `deployment` (Azure), a repeated one with different values AmbiguousRequest;
 * - any other path (OpenAI, Anthropic, Azure's `/openai/v1/…`, Ollama, OpenAI-compatible
 *   servers): the top-level `model` of the JSON body, from the one parse LLM rules already make
 *   (view.llmBody()). A body that names its model twice with different values (`{"model":"a",
 *   …,"model":"b"}`, or one spelled with `\u` escapes) is AmbiguousRequest: parsers disagree on
 *   which one counts, as they do on a repeated header.
 * The value is lower-cased (model names are compared without case: `GPT-4o` is not a fresh
 * bucket) and cut to MAX_MODEL characters. Missing: no such path and no readable body (over the
 * bytes held, not JSON, no string `model`), or a decision-service call on a body path.
 */
import { AmbiguousRequest } from '../errors.js'
import type { RequestView } from './view.js'

/** Longer names are cut here: a counter key stays bounded whatever a body says. */
export const MAX_MODEL = 256

const AZURE = /^\/openai\/deployments\/([^/]+)\//i
const GOOGLE = /\/(?:models|tunedmodels)\/([^/]+)$/i
const BEDROCK = /^\/model\/(.+)\/(?:converse|converse-stream|invoke|invoke-with-response-stream)$/i

function decoded(segment: string): string {
  if (!segment.includes('%')) return segment
  try {
    return decodeURIComponent(segment)
  } catch {
    return segment
  }
}

function clean(model: string): string | undefined {
  if (model === '') return undefined
  const m = model.length > MAX_MODEL ? model.slice(0, MAX_MODEL) : model
  return m.toLowerCase()
}

/** The model named by the path of an API that reads it there; undefined for any other path. */
export function modelOfPath(path: string): string | undefined {
  let m = AZURE.exec(path)
  if (m !== null) return decoded(m[1]!)
  m = GOOGLE.exec(path)
  if (m !== null) {
    // `gemini-2.0-flash:generateContent`; the `:` may come escaped.
    const seg = decoded(m[1]!)
    const colon = seg.lastIndexOf(':')
    return colon > 0 ? seg.slice(0, colon) : undefined
  }
  m = BEDROCK.exec(path)
  return m === null ? undefined : decoded(m[1]!)
}

const QUOTE = 0x22
const BACKSLASH = 0x5c
const MODEL_KEY = Buffer.from('"model"')
const ESCAPE_U = Buffer.from('\\u')

/**
 * The end (index of the closing quote) of the JSON string starting at `start`. A native search
 * (memchr) jumps over the text: most of a body is string content.
 */
function stringEnd(b: Buffer, start: number): number {
  let q = b.indexOf(QUOTE, start + 1)
  while (q !== -1) {
    // A quote after an odd run of backslashes is escaped.
    let k = q - 1
    while (b[k] === BACKSLASH) k--
    if ((q - 1 - k) % 2 === 0) return q
    q = b.indexOf(QUOTE, q + 1)
  }
  return b.length
}

/** The longest key text that can still read as `model`: each letter as a six-character `\u` escape. */
const MAX_MODEL_KEY = 5 * 6

/** Whether the key string b[start..end] (quotes included) reads as `model`. */
function isModelKey(b: Buffer, start: number, end: number): boolean {
  const n = end - start - 1
  if (n === 5) return b.toString('latin1', start + 1, end) === 'model'
  // Only a key spelled with escapes can still be `model`: a few short top-level keys are parsed.
  return n > 5 && n <= MAX_MODEL_KEY && JSON.parse(b.toString('utf8', start, end + 1)) === 'model'
}

function isWhitespace(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09
}

/**
 * The values of every top-level `model` key of a JSON object's text (valid JSON: it parsed),
 * `null` for a value that is not a string. One pass over the bytes: structural characters are
 * ASCII, so UTF-8 text inside strings never looks like one.
 */
export function topLevelModels(b: Buffer): (string | null)[] {
  const out: (string | null)[] = []
  let depth = 0
  let expectKey = false
  for (let i = 0; i < b.length; i++) {
    const c = b[i]!
    if (c === QUOTE) {
      const end = stringEnd(b, i)
      if (depth === 1 && expectKey) {
        expectKey = false
        if (isModelKey(b, i, end)) {
          let j = end + 1
          while (j < b.length && (isWhitespace(b[j]!) || b[j] === 0x3a)) j++
          if (b[j] === QUOTE) {
            const vend = stringEnd(b, j)
            out.push(JSON.parse(b.toString('utf8', j, vend + 1)) as string)
            i = vend
            continue
          }
          out.push(null)
        }
      }
      i = end
    } else if (c === 0x7b || c === 0x5b) {
      depth++
      if (depth === 1) expectKey = c === 0x7b
    } else if (c === 0x7d || c === 0x5d) depth--
    else if (c === 0x2c && depth === 1) expectKey = true
  }
  return out
}

/** The body's `model`, refusing one the body names twice with different values. */
function modelOfBody(view: RequestView): string | undefined {
  const body = view.llmBody()
  const model = body.json?.model
  const held = body.held
  if (body.json === undefined || held === undefined) return undefined
  // At most one literal `"model"` and no `\u` escape: no second key can be `model`, nothing to scan.
  const first = held.indexOf(MODEL_KEY)
  if ((first !== -1 && held.indexOf(MODEL_KEY, first + 1) !== -1) || held.indexOf(ESCAPE_U) !== -1) {
    const all = topLevelModels(held)
    for (let i = 1; i < all.length; i++)
      if (all[i] !== all[0]) throw new AmbiguousRequest('the request body names its model more than once, with different values')
  }
  return typeof model === 'string' ? model : undefined
}

/** The llm:model of a request (see above); undefined when missing. */
export function llmModel(view: RequestView): string | undefined {
  const path = view.path
  if (path.endsWith('/realtime')) return clean(view.keyQuery(path.startsWith('/openai/') ? 'deployment' : 'model') ?? '')
  return clean(modelOfPath(path) ?? modelOfBody(view) ?? '')
}
