/**
 * An LLM upstream (a real HTTP server on port 0) that replays the recorded
 * responses in test/fixtures/llm/, chosen per request with headers the SDK
 * clients add:
 *   x-fixture         file name (`.sse`: text/event-stream, else JSON)
 *   x-encode          compress the body anyway (gzip | deflate | br), whatever Accept-Encoding says
 *   x-content-length  send Content-Length with the body (also for SSE)
 *   x-crlf            line ends as \r\n
 *   x-split           write the body in pieces of this many bytes
 *   x-hold-after      write only this many bytes, then hold the response open (a client that leaves mid-stream)
 * The Accept-Encoding of every request is recorded.
 */
import { readFileSync } from 'node:fs'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib'
import { startBackend, type Backend } from './processes.js'

export interface ReplayLlm extends Backend {
  acceptEncodings: (string | undefined)[]
}

const DIR = new URL('../fixtures/llm/', import.meta.url)

export function fixture(name: string): string {
  return readFileSync(new URL(name, DIR), 'utf8')
}

const ENCODERS: Record<string, (b: Buffer) => Buffer> = { gzip: gzipSync, deflate: deflateSync, br: brotliCompressSync }

function replay(req: IncomingMessage, res: ServerResponse): void {
  const name = String(req.headers['x-fixture'] ?? '')
  let text = fixture(name)
  if (req.headers['x-crlf'] !== undefined) text = text.replace(/\n/g, '\r\n')
  let body: Buffer = Buffer.from(text)
  const headers: Record<string, string> = {
    'content-type': name.endsWith('.sse') ? 'text/event-stream; charset=utf-8' : 'application/json',
  }
  const enc = req.headers['x-encode'] as string | undefined
  if (enc !== undefined) {
    body = ENCODERS[enc]!(body)
    headers['content-encoding'] = enc
  }
  if (req.headers['x-content-length'] !== undefined || !name.endsWith('.sse')) headers['content-length'] = String(body.length)
  res.writeHead(200, headers)
  const split = Number(req.headers['x-split'] ?? 512)
  const hold = req.headers['x-hold-after'] === undefined ? undefined : Number(req.headers['x-hold-after'])
  if (hold !== undefined) body = body.subarray(0, hold)
  let at = 0
  const next = (): void => {
    if (res.destroyed) return
    if (at >= body.length) return void (hold === undefined && res.end())
    res.write(body.subarray(at, at + split))
    at += split
    setImmediate(next)
  }
  next()
}

export async function startReplayLlm(): Promise<ReplayLlm> {
  const acceptEncodings: (string | undefined)[] = []
  const b = (await startBackend((req, res) => {
    acceptEncodings.push(req.headers['accept-encoding'])
    req.resume()
    req.on('end', () => replay(req, res))
  })) as ReplayLlm
  b.acceptEncodings = acceptEncodings
  return b
}
