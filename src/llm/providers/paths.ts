/**
 * Which provider's native API a request path names (docs/llm.md, Providers), beside the
 * OpenAI and Anthropic paths of dialects/stream-facts.ts:
 * - Gemini: a model method, `/v1beta/models/{model}:generateContent`,
 *   `:streamGenerateContent`, `:countTokens`, … (also `tunedModels/`, and Vertex AI's
 *   `…/publishers/google/models/{model}:…`); the colon may come escaped (`%3A`);
 * - Bedrock: `/model/{modelId}/converse`, `/converse-stream`, `/invoke`,
 *   `/invoke-with-response-stream`, `/count-tokens` (the SDK escapes the model id's `:` and
 *   `/`, so the id is anything up to the operation);
 * - Ollama: `/api/chat`, `/api/generate`, `/api/embed`, `/api/embeddings`.
 * A leaf: request/ (credentials) and llm/ (dialects, framings, usage) both read it.
 */

export type ProviderApi = 'gemini' | 'bedrock' | 'ollama'

const GEMINI = /\/(?:models|tunedModels)\/[^/]+(?::|%3[Aa])[A-Za-z]+$/
const GEMINI_STREAM = /(?::|%3[Aa])streamGenerateContent$/
const BEDROCK = /\/model\/.+\/(?:converse|converse-stream|invoke|invoke-with-response-stream|count-tokens)$/
const BEDROCK_INVOKE = /\/invoke(?:-with-response-stream)?$/
const OLLAMA = /\/api\/(?:chat|generate|embed|embeddings)$/

/** The path without its query string. */
export function pathOnly(path: string): string {
  const q = path.indexOf('?')
  return q === -1 ? path : path.slice(0, q)
}

/** The provider whose native API `p` (no query string) names; undefined for any other path. */
export function providerOfPath(p: string): ProviderApi | undefined {
  // Substring tests first (every request keyed on llm:api_key asks): each path holds its mark.
  if ((p.includes(':') || p.includes('%3')) && GEMINI.test(p)) return 'gemini'
  if (p.includes('/model/') && BEDROCK.test(p)) return 'bedrock'
  if (p.includes('/api/') && OLLAMA.test(p)) return 'ollama'
  return undefined
}

export const isProviderApi = (api: string | undefined): api is ProviderApi => api === 'gemini' || api === 'bedrock' || api === 'ollama'

/** Gemini's stream method (`:streamGenerateContent`), whose answer without `alt=sse` is one JSON array. */
export const isGeminiStream = (p: string): boolean => GEMINI_STREAM.test(p)

/** Bedrock's InvokeModel operations, whose body is the model's own format (not Converse). */
export const isBedrockInvoke = (p: string): boolean => BEDROCK_INVOKE.test(p)
