/**
 * An Ollama upstream (a real HTTP server on port 0) answering as its API reference shows
 * (github.com/ollama/ollama docs/api.md): `/api/chat` and `/api/generate` stream NDJSON
 * (`application/x-ndjson`) unless the body says `"stream": false`, one object per chunk
 * (`message` for chat, `response` for generate), the last with `"done": true`,
 * `done_reason`, the durations and the counts; `/api/embed` answers `embeddings` with
 * `prompt_eval_count`. Per request:
 *   x-chunks      chunks of text (default 3), each `x-chunk-chars` characters (default 40)
 *   x-usage-out   eval_count reported (default 10 per chunk)
 * Reported prompt: PROMPT_EVAL tokens.
 */
import { startBackend, type Backend } from './processes.js'

export const PROMPT_EVAL = 26

export function pieceText(i: number, chars: number): string {
  return `<${i}> ${'pack my box with five dozen liquor jugs '.repeat(Math.ceil(chars / 40))}`.slice(0, chars)
}

export async function startOllamaUpstream(): Promise<Backend> {
  return startBackend((req, res) => {
    const parts: Buffer[] = []
    req.on('data', (c: Buffer) => parts.push(c))
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(parts).toString('utf8') || '{}') as Record<string, unknown>
      const n = Number(req.headers['x-chunks'] ?? 3)
      const chars = Number(req.headers['x-chunk-chars'] ?? 40)
      const out = Number(req.headers['x-usage-out'] ?? n * 10)
      const model = String(body.model ?? 'llama3.2')
      const chat = req.url === '/api/chat'
      if (req.url === '/api/embed') {
        res.writeHead(200, { 'content-type': 'application/json; charset=utf-8' })
        return void res.end(
          JSON.stringify({
            model,
            embeddings: [[0.01, -0.02, 0.03]],
            total_duration: 14143917,
            load_duration: 1019500,
            prompt_eval_count: 8,
          }),
        )
      }
      const at = (i: number): string => new Date(Date.UTC(2026, 0, 1, 0, 0, 0, i)).toISOString()
      const piece = (i: number, text: string): object => ({
        model,
        created_at: at(i),
        ...(chat ? { message: { role: 'assistant', content: text } } : { response: text }),
        done: false,
      })
      const last = (text: string): object => ({
        ...piece(n, text),
        done: true,
        done_reason: 'stop',
        ...(chat ? {} : { context: [1, 2, 3] }),
        total_duration: 4883583458,
        load_duration: 1334875,
        prompt_eval_count: PROMPT_EVAL,
        prompt_eval_duration: 342546000,
        eval_count: out,
        eval_duration: 4535599000,
      })
      if (body.stream === false) {
        res.writeHead(200, { 'content-type': 'application/json; charset=utf-8' })
        return void res.end(JSON.stringify(last(Array.from({ length: n }, (_, i) => pieceText(i, chars)).join(''))))
      }
      res.writeHead(200, { 'content-type': 'application/x-ndjson' })
      let i = 0
      const next = (): void => {
        if (res.destroyed) return
        if (i === n) return void res.end(`${JSON.stringify(last(''))}\n`)
        res.write(`${JSON.stringify(piece(i, pieceText(i, chars)))}\n`)
        i++
        setImmediate(next)
      }
      next()
    })
  })
}
