/**
 * `llm:api_key` (docs/behaviour.md §3): the API key an LLM client sends,
 * wherever its SDK puts it — `x-api-key` (Anthropic), `api-key` (Azure
 * OpenAI), or the token of `Authorization: Bearer …` (OpenAI, and Anthropic
 * with an auth token) — so one rule limits a key whichever header carries
 * it. The first present wins in that order; the value is the bare key, so the
 * same key sent either way shares one bucket.
 */
import type { RequestView } from './view.js'

const BEARER = /^\s*bearer\s+(\S+)\s*$/i

export function apiKey(v: RequestView): string | undefined {
  const direct = v.header('x-api-key')?.trim() || v.header('api-key')?.trim()
  if (direct) return direct
  const auth = v.header('authorization')
  if (auth === undefined) return undefined
  return BEARER.exec(auth)?.[1]
}
