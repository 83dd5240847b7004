/**
 * The request body for LLM rules (docs/behaviour.md §5): read before the decision only
 * when a policy the request matches has a token_bucket_llm rule (a flag set
 * at bundle load, so other traffic pays one property read), and then at most
 * its first MiB: the decision estimates from it (and Content-Length); the
 * proxy forwards it and streams the rest unread.
 */
import type { IncomingMessage } from 'node:http'
import type { CompiledBundle } from '../bundle/compile.js'
import { MAX_HELD_BODY } from '../llm/request-body.js'
import { RequestView, type RequestInput } from '../request/view.js'
import type { HeldBody } from './proxy.js'

/** Whether the request must be read before deciding. */
export function needsBody(bundle: CompiledBundle | null, input: RequestInput): boolean {
  if (bundle === null || !bundle.llm) return false
  const v = new RequestView(input, undefined)
  for (const p of bundle.index.match(v.method, v.path, v.host)) if (p.llm) return true
  return false
}

/**
 * Reads up to MAX_HELD_BODY bytes of `req`, then pauses it. `done` runs once
 * with what was held; not at all when the client leaves first.
 */
export function readHead(req: IncomingMessage, done: (h: HeldBody) => void): void {
  const chunks: Buffer[] = []
  let n = 0
  const finish = (ended: boolean): void => {
    req.off('data', onData)
    req.off('end', onEnd)
    req.off('close', onClose)
    if (!ended) req.pause()
    const all = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)
    const held = all.length > MAX_HELD_BODY ? all.subarray(0, MAX_HELD_BODY) : all
    done({ held, spill: all.length > MAX_HELD_BODY ? all.subarray(MAX_HELD_BODY) : undefined, ended })
  }
  const onData = (c: Buffer): void => {
    chunks.push(c)
    n += c.length
    if (n >= MAX_HELD_BODY) finish(false)
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
