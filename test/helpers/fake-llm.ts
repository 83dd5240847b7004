/**
 * A fake LLM backend (a real HTTP server on port 0): OpenAI Chat Completions
 * (`/v1/chat/completions`) and Anthropic Messages (`/v1/messages`), as JSON
 * or as SSE when the body says `"stream": true`, with the usage the test
 * chooses in request headers:
 *   x-fake-prompt / x-fake-completion  usage to report (absent: none reported)
 *   x-fake-chunks                      SSE content events (default 10), 40 characters each (10 tokens)
 * `/upload` counts the bytes it receives (uploaded(n) waits for a count). Every
 * request's path and the number of SSE events actually written are recorded.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import { startBackend, type Backend } from './processes.js'

export interface FakeLlm extends Backend {
  /** Bytes received by /upload requests, in order. */
  uploads: number[]
  /** Resolves once the /upload request in progress has received `n` bytes; rejects after `timeoutMs`, saying how many came. */
  uploaded(n: number, timeoutMs?: number): Promise<void>
  /** SSE responses the client left or the gateway cut: events written before the socket closed. */
  written: number[]
}

const TEXT = 'abcdefghij'.repeat(4) // 40 characters: 10 tokens by the stream count

function usageOf(req: IncomingMessage): { prompt: number; completion: number } | undefined {
  const p = req.headers['x-fake-prompt']
  const c = req.headers['x-fake-completion']
  return p === undefined || c === undefined ? undefined : { prompt: Number(p), completion: Number(c) }
}

function sse(res: ServerResponse, events: string[], written: number[]): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' })
  let i = 0
  const next = (): void => {
    if (res.destroyed) return void written.push(i)
    if (i === events.length) return void res.end()
    res.write(events[i++])
    setTimeout(next, 2)
  }
  res.on('close', () => {
    if (i < events.length) written.push(i)
  })
  next()
}

function openai(body: Record<string, unknown>, req: IncomingMessage, res: ServerResponse, written: number[]): void {
  const u = usageOf(req)
  const usage = u && { prompt_tokens: u.prompt, completion_tokens: u.completion, total_tokens: u.prompt + u.completion }
  if (body.stream !== true) {
    const text = JSON.stringify({
      id: 'c1',
      object: 'chat.completion',
      choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, finish_reason: 'stop' }],
      ...(usage ? { usage } : {}),
    })
    res.writeHead(200, { 'content-type': 'application/json' })
    return void res.end(text)
  }
  const n = Number(req.headers['x-fake-chunks'] ?? 10)
  const events: string[] = []
  for (let i = 0; i < n; i++)
    events.push(`data: ${JSON.stringify({ id: 'c1', choices: [{ index: 0, delta: { content: TEXT } }], usage: null })}\n\n`)
  events.push(`data: ${JSON.stringify({ id: 'c1', choices: [{ index: 0, delta: {}, finish_reason: 'stop' }], usage: null })}\n\n`)
  const include = (body.stream_options as { include_usage?: boolean } | undefined)?.include_usage === true
  if (include && usage) events.push(`data: ${JSON.stringify({ id: 'c1', choices: [], usage })}\n\n`)
  events.push('data: [DONE]\n\n')
  sse(res, events, written)
}

function anthropic(body: Record<string, unknown>, req: IncomingMessage, res: ServerResponse, written: number[]): void {
  const u = usageOf(req)
  if (body.stream !== true) {
    res.writeHead(200, { 'content-type': 'application/json' })
    return void res.end(
      JSON.stringify({
        id: 'm1',
        type: 'message',
        role: 'assistant',
        content: [{ type: 'text', text: 'hi' }],
        ...(u ? { usage: { input_tokens: u.prompt, output_tokens: u.completion } } : {}),
      }),
    )
  }
  const n = Number(req.headers['x-fake-chunks'] ?? 10)
  const ev = (type: string, data: object): string => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`
  const events = [
    ev('message_start', {
      message: {
        id: 'm1',
        type: 'message',
        role: 'assistant',
        content: [],
        ...(u ? { usage: { input_tokens: u.prompt, output_tokens: 1 } } : {}),
      },
    }),
  ]
  for (let i = 0; i < n; i++) events.push(ev('content_block_delta', { index: 0, delta: { type: 'text_delta', text: TEXT } }))
  events.push(ev('message_delta', { delta: { stop_reason: 'end_turn' }, ...(u ? { usage: { output_tokens: u.completion } } : {}) }))
  events.push(ev('message_stop', {}))
  sse(res, events, written)
}

export async function startFakeLlm(): Promise<FakeLlm> {
  const uploads: number[] = []
  const written: number[] = []
  let receiving = 0
  const waiters: { n: number; resolve: () => void }[] = []
  const b = (await startBackend((req, res) => {
    if (req.url?.endsWith('/upload')) {
      let n = 0
      receiving = 0
      req.on('data', (c: Buffer) => {
        n += c.length
        receiving = n
        for (let i = waiters.length - 1; i >= 0; i--) if (waiters[i]!.n <= n) waiters.splice(i, 1)[0]!.resolve()
      })
      req.on('end', () => {
        uploads.push(n)
        res.writeHead(200, { 'content-type': 'application/json' })
        res.end(JSON.stringify({ received: n, usage: { prompt_tokens: 1, completion_tokens: 1 } }))
      })
      return
    }
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      let body: Record<string, unknown> = {}
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>
      } catch {
        // not JSON: answered as a non-streaming call
      }
      if (req.url?.endsWith('/v1/messages')) anthropic(body, req, res, written)
      else openai(body, req, res, written)
    })
  })) as FakeLlm
  b.uploads = uploads
  b.written = written
  b.uploaded = (n, timeoutMs = 30_000) =>
    receiving >= n
      ? Promise.resolve()
      : new Promise((resolve, reject) => {
          const w = {
            n,
            resolve: () => {
              clearTimeout(t)
              resolve()
            },
          }
          const t = setTimeout(() => {
            waiters.splice(waiters.indexOf(w), 1)
            reject(new Error(`the backend received ${receiving} of ${n} bytes within ${timeoutMs} ms`))
          }, timeoutMs)
          waiters.push(w)
        })
  return b
}
