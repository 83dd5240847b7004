/**
 * A Gemini API upstream (a real HTTP server on port 0) answering as the public reference
 * shows (ai.google.dev/api/generate-content): `:generateContent` one GenerateContentResponse,
 * `:streamGenerateContent?alt=sse` its chunks as `data:` events ending in CRLF CRLF,
 * `:streamGenerateContent` without `alt` one JSON array written element by element, pretty
 * printed as Google writes it. Every chunk carries `usageMetadata` (promptTokenCount, the
 * cumulative candidatesTokenCount, totalTokenCount); the last one also `thoughtsTokenCount`
 * and `finishReason: "STOP"`. Chosen per request with headers:
 *   x-chunks      text chunks (default 3), each `x-chunk-chars` characters (default 40)
 *   x-usage-out   candidatesTokenCount reported at the end (default 10 per chunk)
 * Reported usage: PROMPT_TOKENS in, the candidates and THOUGHT_TOKENS out. Requests are recorded.
 */
import type { IncomingMessage } from 'node:http'
import { startBackend, type Backend } from './processes.js'

export const PROMPT_TOKENS = 12
export const THOUGHT_TOKENS = 14

export interface GeminiRequest {
  url: string
  headers: IncomingMessage['headers']
  body: Record<string, unknown>
}

export interface GeminiUpstream extends Backend {
  requests: GeminiRequest[]
}

/** The text of chunk `i`: quotes, braces and escapes, so a framing that ignored strings would be seen. */
export function chunkText(i: number, chars: number): string {
  const head = `[${i}] "{}" \\ `
  return (head + 'lorem ipsum dolor sit amet '.repeat(Math.ceil(chars / 27))).slice(0, chars)
}

function chunk(i: number, n: number, chars: number, out: number, last: boolean): object {
  const candidates = last ? out : Math.round((out * (i + 1)) / n)
  return {
    candidates: [
      {
        content: { parts: [{ text: chunkText(i, chars) }], role: 'model' },
        ...(last ? { finishReason: 'STOP' } : {}),
        index: 0,
      },
    ],
    usageMetadata: {
      promptTokenCount: PROMPT_TOKENS,
      candidatesTokenCount: candidates,
      totalTokenCount: PROMPT_TOKENS + candidates + (last ? THOUGHT_TOKENS : 0),
      ...(last ? { thoughtsTokenCount: THOUGHT_TOKENS } : {}),
      promptTokensDetails: [{ modality: 'TEXT', tokenCount: PROMPT_TOKENS }],
    },
    modelVersion: 'gemini-2.5-flash',
    responseId: 'mBPkaMPnHqKinvgPqbvJ0Qk',
  }
}

export async function startGeminiUpstream(): Promise<GeminiUpstream> {
  const requests: GeminiRequest[] = []
  const up = (await startBackend((req, res) => {
    const parts: Buffer[] = []
    req.on('data', (c: Buffer) => parts.push(c))
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(parts).toString('utf8') || '{}') as Record<string, unknown>
      requests.push({ url: req.url ?? '', headers: req.headers, body })
      const n = Number(req.headers['x-chunks'] ?? 3)
      const chars = Number(req.headers['x-chunk-chars'] ?? 40)
      const out = Number(req.headers['x-usage-out'] ?? n * 10)
      const path = (req.url ?? '').split('?')[0]!
      const sse = (req.url ?? '').includes('alt=sse')
      if (!path.endsWith(':streamGenerateContent')) {
        const whole = chunk(0, 1, chars * n, out, true)
        res.writeHead(200, { 'content-type': 'application/json; charset=UTF-8' })
        return void res.end(JSON.stringify(whole, null, 2))
      }
      res.writeHead(200, { 'content-type': sse ? 'text/event-stream' : 'application/json; charset=UTF-8' })
      let i = 0
      const next = (): void => {
        if (res.destroyed) return
        if (i === n) return void res.end(sse ? '' : '\n]')
        const c = chunk(i, n, chars, out, i === n - 1)
        res.write(sse ? `data: ${JSON.stringify(c)}\r\n\r\n` : `${i === 0 ? '[' : '\n,\r\n'}${JSON.stringify(c, null, 2)}`)
        i++
        setImmediate(next)
      }
      next()
    })
  })) as GeminiUpstream
  up.requests = requests
  return up
}
