/**
 * An AWS Bedrock runtime upstream (a real HTTP server on port 0) answering Converse and
 * ConverseStream as the public reference shows (docs.aws.amazon.com/bedrock/latest/APIReference:
 * API_runtime_Converse, API_runtime_ConverseStream): a JSON answer with camelCase `usage` and
 * `metrics`, or an `application/vnd.amazon.eventstream` of binary messages (encoded with the
 * AWS SDK's own codec): messageStart, contentBlockDelta × n, contentBlockStop, messageStop,
 * metadata (usage, metrics); each payload padded with `p`, as Bedrock pads them. Per request:
 *   x-chunks      text deltas (default 3), each `x-chunk-chars` characters (default 40)
 *   x-usage-out   outputTokens reported (default 10 per delta)
 *   x-corrupt     the third message's last byte (its CRC) flipped
 * Reported input: INPUT_TOKENS plus CACHE_READ_TOKENS read from the prompt cache.
 * Requests are recorded (path as sent, headers).
 */
import type { IncomingMessage } from 'node:http'
import { EventStreamCodec } from '@smithy/core/event-streams'
import { startBackend, type Backend } from './processes.js'

export const INPUT_TOKENS = 25
export const CACHE_READ_TOKENS = 7

export interface BedrockUpstream extends Backend {
  requests: { url: string; headers: IncomingMessage['headers']; body: Record<string, unknown> }[]
}

const codec = new EventStreamCodec(
  (b) => Buffer.from(b).toString('utf8'),
  (s) => Buffer.from(s, 'utf8'),
)

export function event(type: string, payload: object): Buffer {
  return Buffer.from(
    codec.encode({
      headers: {
        ':event-type': { type: 'string', value: type },
        ':content-type': { type: 'string', value: 'application/json' },
        ':message-type': { type: 'string', value: 'event' },
      },
      body: Buffer.from(JSON.stringify({ ...payload, p: 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJ' })),
    }),
  )
}

export function deltaText(i: number, chars: number): string {
  return `[${i}] ${'the quick brown fox jumps over the lazy dog '.repeat(Math.ceil(chars / 44))}`.slice(0, chars)
}

const usage = (out: number): object => ({
  inputTokens: INPUT_TOKENS,
  outputTokens: out,
  totalTokens: INPUT_TOKENS + out + CACHE_READ_TOKENS,
  cacheReadInputTokens: CACHE_READ_TOKENS,
  cacheWriteInputTokens: 0,
})

export async function startBedrockUpstream(): Promise<BedrockUpstream> {
  const requests: BedrockUpstream['requests'] = []
  const up = (await startBackend((req, res) => {
    const parts: Buffer[] = []
    req.on('data', (c: Buffer) => parts.push(c))
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(parts).toString('utf8') || '{}') as Record<string, unknown>
      requests.push({ url: req.url ?? '', headers: req.headers, body })
      const n = Number(req.headers['x-chunks'] ?? 3)
      const chars = Number(req.headers['x-chunk-chars'] ?? 40)
      const out = Number(req.headers['x-usage-out'] ?? n * 10)
      if ((req.url ?? '').endsWith('/converse')) {
        const text = Array.from({ length: n }, (_, i) => deltaText(i, chars)).join('')
        res.writeHead(200, { 'content-type': 'application/json', 'x-amzn-requestid': 'c0ffee00-0000-4000-8000-000000000001' })
        return void res.end(
          JSON.stringify({
            output: { message: { role: 'assistant', content: [{ text }] } },
            stopReason: 'end_turn',
            usage: usage(out),
            metrics: { latencyMs: 412 },
          }),
        )
      }
      const messages = [
        event('messageStart', { role: 'assistant' }),
        ...Array.from({ length: n }, (_, i) => event('contentBlockDelta', { contentBlockIndex: 0, delta: { text: deltaText(i, chars) } })),
        event('contentBlockStop', { contentBlockIndex: 0 }),
        event('messageStop', { stopReason: 'end_turn' }),
        event('metadata', { usage: usage(out), metrics: { latencyMs: 733 } }),
      ]
      const third = messages[2]!
      if (req.headers['x-corrupt'] !== undefined) third[third.length - 1] = third[third.length - 1]! ^ 0xff
      res.writeHead(200, {
        'content-type': 'application/vnd.amazon.eventstream',
        'x-amzn-requestid': 'c0ffee00-0000-4000-8000-000000000002',
      })
      // Written in pieces that split messages (and their preludes) anywhere.
      const all = Buffer.concat(messages)
      let at = 0
      const next = (): void => {
        if (res.destroyed) return
        if (at >= all.length) return void res.end()
        res.write(all.subarray(at, at + 333))
        at += 333
        setImmediate(next)
      }
      next()
    })
  })) as BedrockUpstream
  up.requests = requests
  return up
}
