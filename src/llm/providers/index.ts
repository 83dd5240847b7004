/**
 * The provider APIs' readers behind the dispatch points of llm/usage.ts (usage, completion
 * text) and llm/request-body.ts (the output cap), told apart by the shape of what they read,
 * as the OpenAI and Anthropic readers are: Gemini's `usageMetadata` and `candidates`,
 * Bedrock's camelCase `usage`, its `contentBlockDelta` (`contentBlockIndex` and `delta`) and
 * InvokeModel's metrics, Ollama's objects with a boolean `done`. No other API sends these.
 */
import type { Usage } from '../usage.js'
import { isObj, type Obj } from './json-values.js'
import { bedrockCap, bedrockText, bedrockUsage, invocationUsage } from './bedrock.js'
import { geminiCap, geminiText, geminiUsage } from './gemini.js'
import { ollamaCap, ollamaText, ollamaUsage } from './ollama.js'

export { type ProviderApi, isProviderApi, providerOfPath } from './paths.js'

/**
 * Usage a provider's JSON answer or stream event carries, merged into `into`; whether it is the
 * call's final figure (Gemini repeats a running `usageMetadata` in every chunk: final once a
 * candidate has its `finishReason`).
 */
export function providerUsage(o: Obj, into: Usage): boolean {
  if (isObj(o.usageMetadata)) {
    geminiUsage(o.usageMetadata, into)
    return Array.isArray(o.candidates) ? o.candidates.some((c) => isObj(c) && typeof c.finishReason === 'string') : true
  }
  if (isObj(o.usage) && bedrockUsage(o.usage, into)) return true
  const metrics = o['amazon-bedrock-invocationMetrics']
  if (isObj(metrics)) {
    invocationUsage(metrics, into)
    return true
  }
  // Gemini's countTokens answer ({"totalTokens": n}) is free.
  if (typeof o.totalTokens === 'number' && o.candidates === undefined && o.usage === undefined) {
    into.prompt = 0
    into.completion = 0
    return true
  }
  return ollamaUsage(o, into)
}

/** The completion text a provider's stream event adds ('' for none). */
export function providerText(o: Obj): string {
  if (Array.isArray(o.candidates)) return geminiText(o.candidates)
  if (typeof o.contentBlockIndex === 'number' && isObj(o.delta)) return bedrockText(o.delta)
  if (typeof o.done === 'boolean') return ollamaText(o)
  return ''
}

/** The largest output cap a provider's request field asks for (undefined: none). */
export function providerCap(json: Obj): number | undefined {
  const caps = [geminiCap(json), bedrockCap(json), ollamaCap(json)].filter((c) => c !== undefined)
  return caps.length === 0 ? undefined : Math.max(...caps)
}
