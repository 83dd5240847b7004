/**
 * AWS Bedrock's Converse API (`/model/{modelId}/converse`, `/converse-stream`; docs/llm.md
 * Bedrock): its camelCase usage (`usage.inputTokens` without the cache reads and writes,
 * which are billed as input beside it, `outputTokens`; in the JSON answer and in the
 * stream's `metadata` event), InvokeModel's `amazon-bedrock-invocationMetrics` (the last
 * chunk of an invoke stream), the completion text of a stream's `contentBlockDelta` (text,
 * tool-use input, reasoning), and the output cap a request asks for
 * (`inferenceConfig.maxTokens`).
 */
import type { Usage } from '../usage.js'
import { count, isObj, type Obj, positiveCap } from './json-values.js'

/** A Converse `usage` object, when `u` is one (else false: another API's usage). */
export function bedrockUsage(u: Obj, into: Usage): boolean {
  const input = count(u.inputTokens)
  const output = count(u.outputTokens)
  if (input === undefined && output === undefined) return false
  if (input !== undefined) into.prompt = input + (count(u.cacheReadInputTokens) ?? 0) + (count(u.cacheWriteInputTokens) ?? 0)
  if (output !== undefined) into.completion = output
  return true
}

/** InvokeModel's metrics (`inputTokenCount`, `outputTokenCount`). */
export function invocationUsage(m: Obj, into: Usage): void {
  const input = count(m.inputTokenCount)
  const output = count(m.outputTokenCount)
  if (input !== undefined) into.prompt = input
  if (output !== undefined) into.completion = output
}

/** The text a `contentBlockDelta` event's `delta` adds to the completion. */
export function bedrockText(delta: Obj): string {
  let text = typeof delta.text === 'string' ? delta.text : ''
  const tool = delta.toolUse
  if (isObj(tool) && typeof tool.input === 'string') text += tool.input
  const reasoning = delta.reasoningContent
  if (isObj(reasoning) && typeof reasoning.text === 'string') text += reasoning.text
  return text
}

/** inferenceConfig.maxTokens, undefined when the request sets none. */
export function bedrockCap(json: Obj): number | undefined {
  const c = json.inferenceConfig
  if (!isObj(c)) return undefined
  return positiveCap(c.maxTokens)
}
