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
import { createHash, createHmac, type Hash, type Hmac } from 'node:crypto'
import type { IncomingMessage } from 'node:http'
import { EventStreamCodec } from '@smithy/core/event-streams'
import { SignatureV4 } from '@smithy/signature-v4'
import { startBackend, type Backend } from './processes.js'

export const INPUT_TOKENS = 25
export const CACHE_READ_TOKENS = 7

export interface BedrockUpstream extends Backend {
  /** Each request; `signed`: its SigV4 signature checks out for SECRET_KEY, as AWS would check it. */
  requests: { url: string; headers: IncomingMessage['headers']; body: Record<string, unknown>; signed: boolean }[]
}

/** The secret of every test access key: the upstream checks signatures with it. */
export const SECRET_KEY = 'test-secret'

type Data = string | ArrayBuffer | ArrayBufferView

const bytes = (d: Data): string | Uint8Array =>
  typeof d === 'string' ? d : d instanceof ArrayBuffer ? new Uint8Array(d) : new Uint8Array(d.buffer, d.byteOffset, d.byteLength)

class Sha256 {
  private readonly h: Hash | Hmac
  constructor(secret?: Data) {
    this.h = secret === undefined ? createHash('sha256') : createHmac('sha256', bytes(secret))
  }
  update(d: Data): void {
    this.h.update(bytes(d))
  }
  async digest(): Promise<Uint8Array> {
    return new Uint8Array(this.h.digest())
  }
}

/** Signs the request again over the headers it says it signed, at the date it says, and compares. */
async function checkSignature(req: IncomingMessage, body: Buffer): Promise<boolean> {
  const auth = String(req.headers.authorization ?? '')
  const m = /^AWS4-HMAC-SHA256 Credential=([^/]+)\/\d{8}\/([^/]+)\/([^/]+)\/aws4_request, SignedHeaders=([^,]+), Signature=/.exec(auth)
  if (m === null) return false
  const [, akid, region, service, names] = m as unknown as [string, string, string, string, string]
  const headers: Record<string, string> = {}
  for (const n of names.split(';')) headers[n] = String(req.headers[n] ?? '')
  const url = new URL(req.url ?? '/', 'http://x')
  const stamp = headers['x-amz-date'] ?? ''
  const date = new Date(
    `${stamp.slice(0, 4)}-${stamp.slice(4, 6)}-${stamp.slice(6, 8)}T${stamp.slice(9, 11)}:${stamp.slice(11, 13)}:${stamp.slice(13, 15)}Z`,
  )
  const signer = new SignatureV4({ service, region, credentials: { accessKeyId: akid, secretAccessKey: SECRET_KEY }, sha256: Sha256 })
  const signed = await signer.sign(
    {
      method: req.method ?? 'POST',
      protocol: 'http:',
      hostname: headers.host ?? '',
      path: url.pathname,
      query: Object.fromEntries(url.searchParams),
      headers,
      body,
    },
    { signingDate: date },
  )
  return signed.headers.authorization === auth
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
    req.on('end', async () => {
      const raw = Buffer.concat(parts)
      const body = JSON.parse(raw.toString('utf8') || '{}') as Record<string, unknown>
      requests.push({ url: req.url ?? '', headers: req.headers, body, signed: await checkSignature(req, raw) })
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
