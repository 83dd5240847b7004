/**
 * An LLM upstream (a real HTTP server on port 0) that answers like the API the
 * request path names, with the recorded responses of test/fixtures/llm/:
 * `…/chat/completions`, `…/completions` (legacy), `…/responses` and
 * `…/messages`, as JSON or, when the body asks for a stream, as SSE. For the
 * clients that cannot add a header (the Agents SDK), a test chooses another
 * answer by the request itself: `pick` sees each request and may name
 * another fixture, a status, extra headers, or a body of its own. A Chat
 * Completions or completions stream carries its usage chunk only when the
 * request asked for it (`stream_options.include_usage`), as OpenAI's do.
 * Every request is recorded (path, headers, parsed body).
 */
import { readFileSync } from 'node:fs'
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http'
import { startBackend, type Backend } from './processes.js'

export interface SeenRequest {
  path: string
  headers: IncomingHttpHeaders
  body: Record<string, unknown> | undefined
}

export interface Answer {
  /** A file of test/fixtures/llm/ (`.sse`: text/event-stream, else JSON). */
  fixture?: string
  status?: number
  headers?: Record<string, string>
  /** The body as is, instead of a fixture. */
  body?: string
  /** SSE only: send the events this many at a time, each group as its own write. */
  split?: number
}

export interface ApiLlm extends Backend {
  seen: SeenRequest[]
}

const DIR = new URL('../fixtures/llm/', import.meta.url)
const read = (name: string): string => readFileSync(new URL(name, DIR), 'utf8')

/** The recorded answer of the API `path` names: JSON, or SSE for a stream. */
export function defaultFixture(path: string, stream: boolean): string {
  const p = path.split('?')[0]!
  const kind = p.endsWith('/chat/completions')
    ? 'chat'
    : p.endsWith('/completions')
      ? 'completions'
      : p.endsWith('/responses')
        ? 'responses'
        : p.endsWith('/messages')
          ? 'messages'
          : 'chat'
  return stream ? `${kind}-stream.sse` : `${kind}.json`
}

/** Whether the request asked for a stream's usage (Chat Completions and legacy completions send it only then). */
const asksUsage = (r: SeenRequest): boolean => (r.body?.stream_options as { include_usage?: unknown } | undefined)?.include_usage === true

function answer(res: ServerResponse, a: Answer, r: SeenRequest): void {
  const sse = a.fixture?.endsWith('.sse') === true
  let body = a.body ?? read(a.fixture!)
  // As the OpenAI APIs do: the usage-only chunk only for a request that asked for it.
  if (sse && !asksUsage(r) && /\/(chat\/)?completions$/.test(r.path.split('?')[0]!))
    body = body
      .split(/(?<=\n\n)/)
      .filter((e) => !/"choices":\[\],(?:"model":"[^"]*",)?"usage":\{/.test(e))
      .join('')
  res.writeHead(a.status ?? 200, { 'content-type': sse ? 'text/event-stream; charset=utf-8' : 'application/json', ...a.headers })
  if (!sse) return void res.end(body)
  // Event by event, as an API writes them.
  const events = body.split(/(?<=\n\n)/)
  const step = a.split ?? 1
  let at = 0
  const next = (): void => {
    if (res.destroyed) return
    if (at >= events.length) return void res.end()
    res.write(events.slice(at, at + step).join(''))
    at += step
    setImmediate(next)
  }
  next()
}

export async function startApiLlm(pick?: (r: SeenRequest) => Answer | undefined): Promise<ApiLlm> {
  const seen: SeenRequest[] = []
  const b = (await startBackend((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      let body: Record<string, unknown> | undefined
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>
      } catch {
        body = undefined
      }
      const r: SeenRequest = { path: req.url ?? '/', headers: req.headers, body }
      seen.push(r)
      const a = pick?.(r) ?? {}
      answer(res, { ...a, fixture: a.fixture ?? (a.body === undefined ? defaultFixture(r.path, body?.stream === true) : undefined) }, r)
    })
  })) as ApiLlm
  b.seen = seen
  return b
}
