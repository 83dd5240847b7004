/**
 * The request body for LLM rules (docs/behaviour.md §5 The body): read before the decision
 * only when a policy the request matches has a token_bucket_llm rule (a flag
 * set at bundle load, so other traffic pays one property read).
 *
 * A body with Content-Length is held up to its first MiB: the decision
 * estimates from it and the declared size; the proxy forwards it and streams
 * the rest unread. A body without Content-Length (chunked) has no declared
 * size to estimate from, so it is read on past the first MiB while it can
 * still fit the largest `max_prompt_tokens` of the matched rules at 4 bytes a
 * token: it either ends within that (estimated whole) or passes it and is
 * rejected `prompt_tokens_exceeded` before any byte is forwarded. Memory per
 * such request is bounded by that budget and MAX_COUNTED_BODY whatever the
 * upload's size; rules without max_prompt_tokens read one MiB as before.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { CompiledBundle, CompiledPolicy } from '../bundle/compile.js'
import { notAPrompt } from '../llm/not-prompt.js'
import { MAX_HELD_BODY } from '../llm/request-body.js'
import { RequestView, type RequestInput } from '../request/view.js'
import type { HeldBody } from './proxy.js'

/** The most a chunked body is read before the decision, whatever max_prompt_tokens allows (64 MiB ≈ 16.7 M tokens). */
export const MAX_COUNTED_BODY = 64 * 1024 * 1024

/** Bytes a body of `max` prompt tokens can take under the size estimate (ceil(bytes / 4)), plus one byte to tell it passed. */
const bytesFor = (max: number): number => max * 4 + 1

const budgets = new WeakMap<CompiledPolicy, number>()

function policyBudget(p: CompiledPolicy): number {
  let b = budgets.get(p)
  if (b === undefined) {
    b = MAX_HELD_BODY
    for (const r of p.fallback ? [...p.rules, p.fallback] : p.rules) {
      const max = r.llm?.config.maxPromptTokens
      if (max !== undefined) b = Math.max(b, Math.min(MAX_COUNTED_BODY, bytesFor(max)))
    }
    budgets.set(p, b)
  }
  return b
}

/**
 * Bytes of a chunked body to read before deciding (undefined: the request
 * is not read at all); a body with Content-Length is held to MAX_HELD_BODY.
 */
export function bodyBudget(bundle: CompiledBundle | null, input: RequestInput): number | undefined {
  if (bundle === null || !bundle.llm) return undefined
  const v = new RequestView(input, undefined)
  // A batch or an upload is not a prompt (llm/not-prompt.ts): forwarded as it comes, never held.
  if (notAPrompt(v)) return undefined
  let budget: number | undefined
  for (const p of bundle.index.match(v.method, v.path, v.host, v.alsoPaths)) if (p.llm) budget = Math.max(budget ?? 0, policyBudget(p))
  return budget
}

/**
 * Reads `req` up to MAX_HELD_BODY bytes (`budget` when it declares no
 * Content-Length), then pauses it. `done` runs once with what was held; not
 * at all when the client leaves first.
 */
export function readHead(req: IncomingMessage, budget: number, done: (h: HeldBody) => void): void {
  const limit = req.headers['content-length'] === undefined ? budget : MAX_HELD_BODY
  const chunks: Buffer[] = []
  let n = 0
  const finish = (ended: boolean): void => {
    req.off('data', onData)
    req.off('end', onEnd)
    req.off('close', onClose)
    if (!ended) req.pause()
    const all = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)
    // Past the first MiB only a chunked body is kept whole (it is estimated whole); a declared one spills on.
    const keep = limit > MAX_HELD_BODY ? all.length : MAX_HELD_BODY
    const held = all.length > keep ? all.subarray(0, keep) : all
    done({ held, spill: all.length > keep ? all.subarray(keep) : undefined, ended })
  }
  const onData = (c: Buffer): void => {
    chunks.push(c)
    n += c.length
    if (n >= limit) finish(false)
  }
  const onEnd = (): void => finish(true)
  const onClose = (): void => {
    req.off('data', onData)
    req.off('end', onEnd)
  }
  req.on('data', onData)
  req.once('end', onEnd)
  req.once('close', onClose)
}

/** How long a rejected upload on a `Connection: close` request may go on before the answer is sent anyway. */
const LINGER_MS = 5000

/**
 * Answers a rejected request whose body was not read to its end: the rest is
 * read and dropped so the client, still uploading, gets the answer instead of
 * a reset connection. On a keep-alive connection the answer goes at once and
 * the drain goes on behind it; on `Connection: close` Node closes the socket
 * as soon as the answer is sent, so the answer waits for the upload's end (at
 * most LINGER_MS).
 */
export function rejectHeld(req: IncomingMessage, res: ServerResponse, held: HeldBody | undefined, answer: () => void): void {
  if (held === undefined || held.ended) return answer()
  req.resume()
  if (res.shouldKeepAlive) return answer()
  let sent = false
  const go = (): void => {
    if (sent) return
    sent = true
    clearTimeout(timer)
    answer()
  }
  const timer = setTimeout(go, LINGER_MS)
  req.once('end', go)
  req.once('error', go)
}
