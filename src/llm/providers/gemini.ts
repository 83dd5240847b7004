/**
 * Gemini's native API (`…:generateContent`, `…:streamGenerateContent`; docs/llm.md Gemini):
 * its usage (`usageMetadata`: promptTokenCount, which holds cached tokens, plus
 * toolUsePromptTokenCount as input; candidatesTokenCount plus thoughtsTokenCount as output,
 * both billed so), the completion text of a response chunk (each candidate's parts: text,
 * thoughts, function calls and code as their JSON text), and the output cap a request asks
 * for (`generationConfig.maxOutputTokens`, once per candidate of `candidateCount`). The REST
 * API reads proto JSON, which takes each field in lowerCamelCase or snake_case: both are read.
 */
import type { Usage } from '../usage.js'
import { count, isObj, type Obj, positiveCap } from './json-values.js'

/** Merges one `usageMetadata` into `into` (a stream's chunks repeat it, cumulative: the last wins). */
export function geminiUsage(m: Obj, into: Usage): void {
  const prompt = count(m.promptTokenCount)
  if (prompt === undefined) return
  into.prompt = prompt + (count(m.toolUsePromptTokenCount) ?? 0)
  const candidates = count(m.candidatesTokenCount)
  const thoughts = count(m.thoughtsTokenCount)
  const total = count(m.totalTokenCount)
  if (candidates !== undefined || thoughts !== undefined) into.completion = (candidates ?? 0) + (thoughts ?? 0)
  else if (total !== undefined) into.completion = Math.max(0, total - into.prompt)
}

/** The text a response (or stream chunk) adds to the completion. */
export function geminiText(candidates: unknown[]): string {
  let text = ''
  for (const c of candidates) {
    const parts = isObj(c) && isObj(c.content) ? c.content.parts : undefined
    if (!Array.isArray(parts)) continue
    for (const p of parts) {
      if (!isObj(p)) continue
      if (typeof p.text === 'string') text += p.text
      const call = p.functionCall ?? p.function_call ?? p.executableCode ?? p.executable_code
      if (call !== undefined) text += JSON.stringify(call)
    }
  }
  return text
}

/** maxOutputTokens × candidateCount, undefined when the request sets no cap. */
export function geminiCap(json: Obj): number | undefined {
  const g = json.generationConfig ?? json.generation_config
  if (!isObj(g)) return undefined
  const a = positiveCap(g.maxOutputTokens)
  const b = positiveCap(g.max_output_tokens)
  if (a === undefined && b === undefined) return undefined
  const n = Math.max(positiveCap(g.candidateCount) ?? 1, positiveCap(g.candidate_count) ?? 1)
  return Math.max(a ?? 0, b ?? 0) * n
}
