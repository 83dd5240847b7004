/**
 * Requests under an LLM API's path that are not prompts (docs/llm.md "What is
 * not a prompt"): creating a batch (`POST /v1/batches` names an uploaded file
 * of requests; the upstream bills them later, at half price, and never
 * through this call), the file API (`/files`, `/uploads` and their parts) and
 * any multipart upload (audio transcriptions and translations, image edits,
 * files). Their bodies are not prompt text, so a token_bucket_llm rule neither
 * reads nor estimates them, reserves nothing and settles nothing; their tokens
 * are out of the rule's reach (count them with a rule of their own, e.g. a
 * token_bucket on the path). So a 25 MB recording is not refused as a 6 M-token
 * prompt, and a batch does not hold a default completion it never streams.
 */
import type { RequestView } from '../request/view.js'

/** A path segment naming the batch or file API, anywhere in the path (Azure and proxies put prefixes before `/v1`). */
const NOT_PROMPT_PATH = /\/(?:batches|files|uploads)(?:\/|$)/

export function notAPrompt(v: RequestView): boolean {
  if (NOT_PROMPT_PATH.test(v.path)) return true
  const type = v.header('content-type')
  return type?.trimStart().toLowerCase().startsWith('multipart/') === true
}
