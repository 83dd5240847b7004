/**
 * Access-log lines for `fairvisor test --access-log` (test-replay.ts), each
 * read into the fields of a sample line (test-samples.ts sampleOf) and the
 * time it was logged at:
 * - `nginx-combined`: nginx's default `combined` format,
 *   `$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent"`,
 *   with any fields after it ignored (custom formats often add
 *   `"$http_x_forwarded_for"` or timings). It gives the client address, the
 *   method, the path and query, the status, the Referer and the User-Agent;
 *   nothing else of the headers (no Authorization, no API key), and no Host.
 * - `json-lines`: one JSON object per line, `time` (ISO 8601 with an offset,
 *   epoch seconds as nginx's `$msec`, or nginx's `$time_local`), `ip`,
 *   `method` and `path` (or nginx's `request`, "GET /x HTTP/1.1"), `host`,
 *   `headers`, `status`; other fields are ignored, so an exported log can
 *   carry its own.
 * A line that cannot be read throws LineError; the replay counts it and goes on.
 */
import { LineError } from './test-samples.js'

export const LOG_FORMATS = ['nginx-combined', 'json-lines'] as const
export type LogFormat = (typeof LOG_FORMATS)[number]

export interface LogRequest {
  /** When it was logged, epoch ms. */
  time: number
  /** The request as a sample line's fields (method, path, host, headers, ip, status). */
  fields: Record<string, unknown>
}

/** A quoted field as nginx writes it: `"` and `\` never appear raw inside (escaped `\x22`, or `\"` with escape=json). */
const QUOTED = '"((?:[^"\\\\]|\\\\.)*)"'
const COMBINED = new RegExp(`^(\\S+) \\S+ (.*?) \\[([^\\]]+)\\] ${QUOTED} (\\d{3}) (?:\\d+|-) ${QUOTED} ${QUOTED}(?:\\s|$)`)
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec']
const TIME_LOCAL = /^(\d{2})\/([A-Z][a-z]{2})\/(\d{4}):(\d{2}):(\d{2}):(\d{2}) ([+-])(\d{2})(\d{2})$/
/** ISO 8601 with an offset: a time without one would be read in this machine's zone, not the log's. */
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})$/
const EPOCH = /^\d+(?:\.\d+)?$/
/** Epoch values above this are milliseconds (as seconds they would be past the year 5000). */
const MS_EPOCH = 1e11
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/
const ABSOLUTE = /^(https?):\/\/([^/?#]*)(.*)$/i

/** nginx's escapes undone: `\xHH` (its default) as the byte nginx saw (a latin1 character, as Node reads a request), `\"` and `\\` (escape=json). */
export function unescapeNginx(s: string): string {
  if (!s.includes('\\')) return s
  return s.replace(/\\x([0-9A-Fa-f]{2})|\\(["\\])/g, (_m, hex: string | undefined, ch: string | undefined) =>
    hex !== undefined ? String.fromCharCode(Number.parseInt(hex, 16)) : ch!,
  )
}

/** nginx's `$time_local` (`10/Oct/2000:13:55:36 -0700`) → epoch ms, or undefined. */
export function parseTimeLocal(s: string): number | undefined {
  const m = TIME_LOCAL.exec(s)
  if (!m) return undefined
  const month = MONTHS.indexOf(m[2]!)
  const [day, year, h, min, sec, oh, om] = [m[1], m[3], m[4], m[5], m[6], m[8], m[9]].map(Number) as number[]
  if (month === -1 || h! > 23 || min! > 59 || sec! > 60 || om! > 59) return undefined
  const utc = Date.UTC(year!, month, day!, h!, min!, sec!)
  if (new Date(utc).getUTCDate() !== day) return undefined // 31/Feb
  return utc - (m[7] === '-' ? -1 : 1) * (oh! * 60 + om!) * 60000
}

/** A `time` field: ISO 8601 with an offset, epoch seconds (or milliseconds past 1e11), or `$time_local`. */
export function parseLogTime(v: unknown): number | undefined {
  if (typeof v === 'number') return Number.isFinite(v) && v >= 0 ? (v > MS_EPOCH ? v : v * 1000) : undefined
  if (typeof v !== 'string') return undefined
  if (EPOCH.test(v)) return parseLogTime(Number(v))
  if (ISO.test(v)) {
    const t = Date.parse(v)
    return Number.isNaN(t) ? undefined : t
  }
  return parseTimeLocal(v)
}

/** nginx's `$request` (`GET /x?a=1 HTTP/1.1`) → method, path and, for an absolute-form target, host. */
export function parseRequestLine(request: string): { method: string; path: string; host?: string } {
  const parts = request.split(' ')
  if (parts.length > 2 && /^HTTP\/\d/.test(parts[parts.length - 1]!)) parts.pop()
  const method = parts[0]!
  const target = parts.slice(1).join(' ')
  if (!TOKEN.test(method) || target === '')
    throw new LineError(
      `the request line ${JSON.stringify(request)} is not "METHOD /path HTTP/x.y" (nginx logs "-" for a connection closed before any request)`,
    )
  if (target.startsWith('/')) return { method, path: target }
  const abs = ABSOLUTE.exec(target)
  if (abs) return { method, host: abs[2]!, path: abs[3]!.startsWith('/') ? abs[3]! : `/${abs[3]!}` }
  throw new LineError(`the request target ${JSON.stringify(target)} is not a path`)
}

/** One `combined` line; `host` stands for the Host header the format does not log. */
export function parseCombined(text: string, host: string): LogRequest {
  const m = COMBINED.exec(text)
  if (!m)
    throw new LineError(
      'is not in nginx\'s combined format: $remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent"',
    )
  const time = parseTimeLocal(m[3]!)
  if (time === undefined) throw new LineError(`the time [${m[3]}] is not nginx's $time_local (10/Oct/2000:13:55:36 -0700)`)
  const req = parseRequestLine(unescapeNginx(m[4]!))
  const headers: Record<string, string> = {}
  const referer = unescapeNginx(m[6]!)
  const agent = unescapeNginx(m[7]!)
  if (referer !== '-' && referer !== '') headers.referer = referer
  if (agent !== '-' && agent !== '') headers['user-agent'] = agent
  return {
    time,
    fields: { method: req.method, path: req.path, host: req.host ?? host, headers, ip: m[1]!, status: Number(m[5]) },
  }
}

/** One JSON line; `host` stands for a Host the line does not give. */
export function parseJsonLine(text: string, host: string): LogRequest {
  let o: unknown
  try {
    o = JSON.parse(text)
  } catch (err) {
    throw new LineError(`is not valid JSON (${(err as Error).message})`)
  }
  if (o === null || typeof o !== 'object' || Array.isArray(o)) throw new LineError('must be a JSON object')
  const r = o as Record<string, unknown>
  if (r.time === undefined) throw new LineError('has no "time"')
  const time = parseLogTime(r.time)
  if (time === undefined)
    throw new LineError(`"time" ${JSON.stringify(r.time)} is not ISO 8601 with an offset, epoch seconds or nginx's $time_local`)
  if (typeof r.ip !== 'string') throw new LineError('"ip" (the client address) must be a string')
  const fields: Record<string, unknown> = { ip: r.ip, headers: r.headers }
  if (r.path === undefined && typeof r.request === 'string') {
    const req = parseRequestLine(r.request)
    Object.assign(fields, { method: req.method, path: req.path }, req.host ? { host: req.host } : {})
  } else {
    if (r.path === undefined) throw new LineError('has neither "path" nor "request"')
    Object.assign(fields, { method: r.method, path: r.path })
  }
  if (r.host !== undefined) fields.host = r.host
  const hasHostHeader =
    r.headers !== null && typeof r.headers === 'object' && Object.keys(r.headers).some((k) => k.toLowerCase() === 'host')
  if (fields.host === undefined && !hasHostHeader) fields.host = host
  if (r.status !== undefined) fields.status = typeof r.status === 'string' && /^\d{3}$/.test(r.status) ? Number(r.status) : r.status
  return { time, fields }
}

export function parseLogLine(format: LogFormat, text: string, host: string): LogRequest {
  return format === 'nginx-combined' ? parseCombined(text, host) : parseJsonLine(text, host)
}
