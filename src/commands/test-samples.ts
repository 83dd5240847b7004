/**
 * The sample requests of `fairvisor test`: one JSON object per line (see
 * test.ts for the format) → a RequestInput, with the time it is sent at.
 */
import { type EncodedSlashes, readTarget } from '../request/target.js'
import type { RequestInput } from '../request/view.js'

const FIELDS = new Set(['method', 'path', 'host', 'headers', 'query', 'ip', 'repeat', 'at', 'body', 'response', 'status', 'hold'])
const MAX_REPEAT = 100000

export interface SampleRequest {
  line: number
  input: RequestInput
  repeat: number
  at: number
  /** Path with the merged query, as shown. */
  target: string
  /** The backend's answer for LLM settlement: a JSON body or SSE text (`data: …` events). */
  response?: { contentType: string; body: Buffer }
  /** The status the client gets (default 200): what rules with count_statuses / refund_statuses settle on. */
  status: number
  /** Seconds the exchange lasts: concurrency slots are given back at `at + hold`. */
  hold: number
}

/** `body`: text as is, any other JSON value serialised (an LLM rule estimates its prompt from it). */
function bodyOf(v: unknown): Buffer | undefined {
  if (v === undefined) return undefined
  return Buffer.from(typeof v === 'string' ? v : JSON.stringify(v))
}

/** `response`: a JSON value is a JSON answer; text starting with `data:` or `event:` is an SSE stream, other text JSON. */
function responseOf(v: unknown): SampleRequest['response'] {
  if (v === undefined) return undefined
  if (typeof v !== 'string') return { contentType: 'application/json', body: Buffer.from(JSON.stringify(v)) }
  const sse = /^\s*(data|event):/.test(v)
  return { contentType: sse ? 'text/event-stream' : 'application/json', body: Buffer.from(v) }
}

/** A sample line that cannot be run; the message completes "<file>:<line>: ". */
export class LineError extends Error {}

function str(v: unknown, field: string): string {
  if (typeof v !== 'string') throw new LineError(`"${field}" must be a string`)
  return v
}

/**
 * One JSONL line → a request description; `prevAt` is the previous line's `at`. The path is read
 * as the gateway reads a request line (`slashes`: FAIRVISOR_ENCODED_SLASHES).
 */
export function parseSample(text: string, line: number, prevAt: number, slashes: EncodedSlashes = 'reject'): SampleRequest {
  let o: unknown
  try {
    o = JSON.parse(text)
  } catch (err) {
    throw new LineError(`is not valid JSON (${(err as Error).message})`)
  }
  if (o === null || typeof o !== 'object' || Array.isArray(o)) throw new LineError('must be a JSON object')
  const r = o as Record<string, unknown>
  for (const k of Object.keys(r)) {
    if (!FIELDS.has(k)) throw new LineError(`unknown field "${k}" (known: ${[...FIELDS].join(', ')})`)
  }
  return sampleOf(r, line, prevAt, slashes)
}

/** A sample line's fields (parseSample) or an access-log line's (test-access-log.ts) → a request description. */
export function sampleOf(r: Record<string, unknown>, line: number, prevAt: number, slashes: EncodedSlashes = 'reject'): SampleRequest {
  const method = r.method === undefined ? 'GET' : str(r.method, 'method')
  const fullPath = r.path === undefined ? '/' : str(r.path, 'path')
  if (!fullPath.startsWith('/')) throw new LineError(`"path" must start with / (got ${JSON.stringify(fullPath)})`)
  const q = fullPath.indexOf('?')
  const path = q === -1 ? fullPath : fullPath.slice(0, q)
  const params = new URLSearchParams(q === -1 ? '' : fullPath.slice(q + 1))
  if (r.query !== undefined) {
    if (r.query === null || typeof r.query !== 'object' || Array.isArray(r.query))
      throw new LineError('"query" must be an object of name → value')
    for (const [k, v] of Object.entries(r.query as Record<string, unknown>)) {
      for (const x of Array.isArray(v) ? v : [v]) {
        if (!['string', 'number', 'boolean'].includes(typeof x))
          throw new LineError(`query "${k}" must be a string, number, boolean or a list of them`)
        params.append(k, String(x))
      }
    }
  }
  const rawHeaders: string[] = []
  if (r.headers !== undefined) {
    if (r.headers === null || typeof r.headers !== 'object' || Array.isArray(r.headers))
      throw new LineError('"headers" must be an object of name → value')
    for (const [k, v] of Object.entries(r.headers as Record<string, unknown>)) {
      for (const x of Array.isArray(v) ? v : [v]) {
        if (!['string', 'number', 'boolean'].includes(typeof x))
          throw new LineError(`header "${k}" must be a string, number, boolean or a list of them`)
        rawHeaders.push(k, String(x))
      }
    }
  }
  const hostHeader = rawHeaders.findIndex((h, i) => i % 2 === 0 && h.toLowerCase() === 'host')
  const host = r.host !== undefined ? str(r.host, 'host') : hostHeader !== -1 ? rawHeaders[hostHeader + 1]! : 'localhost'
  const ip = r.ip === undefined ? '127.0.0.1' : str(r.ip, 'ip')
  const repeat = r.repeat === undefined ? 1 : r.repeat
  if (typeof repeat !== 'number' || !Number.isInteger(repeat) || repeat < 1 || repeat > MAX_REPEAT)
    throw new LineError(`"repeat" must be an integer from 1 to ${MAX_REPEAT}`)
  const at = r.at === undefined ? prevAt : r.at
  if (typeof at !== 'number' || !Number.isFinite(at) || at < 0) throw new LineError('"at" must be a number of seconds ≥ 0')
  if (at < prevAt) throw new LineError(`"at" (${at}) is earlier than the previous request's (${prevAt}); time must not go backwards`)
  const status = r.status === undefined ? 200 : r.status
  if (typeof status !== 'number' || !Number.isInteger(status) || status < 100 || status > 599)
    throw new LineError('"status" must be an HTTP status from 100 to 599')
  const hold = r.hold === undefined ? 0 : r.hold
  if (typeof hold !== 'number' || !Number.isFinite(hold) || hold < 0) throw new LineError('"hold" must be a number of seconds ≥ 0')
  const rawQuery = params.toString()
  const read = readTarget(path, host, slashes)
  return {
    line,
    input: {
      method,
      path: read.path,
      alsoPaths: read.alsoPaths,
      refused: read.refused,
      rawQuery,
      host,
      rawHeaders,
      peer: ip,
      body: bodyOf(r.body),
    },
    response: responseOf(r.response),
    status,
    repeat,
    at,
    hold,
    target: rawQuery ? `${path}?${rawQuery}` : path,
  }
}
