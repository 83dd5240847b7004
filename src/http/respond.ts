/**
 * The HTTP side of answering: a decision's response written to a
 * ServerResponse, the throttle delay, JSON and raw-socket answers.
 */
import { STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http'
import type { Duplex } from 'node:stream'
import type { Decision } from '../engine/decision.js'
import { type EncodedSlashes, readTarget } from '../request/target.js'
import { rawHeader } from '../request/raw-headers.js'
import type { RequestInput } from '../request/view.js'
import type { DecisionResponse } from '../decision/response.js'

/**
 * Runs `go` after the decision's delay (at once without one). The delay is a
 * timer: nothing blocks and no store call is held. A request held for its
 * debt (max_delay_ms) waits on its hold (decision/holds.ts), which bounds
 * how many the process holds. A client that goes away meanwhile (`res` is the
 * response, or the socket of an upgrade) is not forwarded: a held request
 * then gives its charges back, and `abandoned` runs (an LLM call's
 * reservation is then given back).
 */
export function afterDelay(d: Decision, res: ServerResponse | Duplex, go: () => void, abandoned?: () => void): void {
  if (d.delayMs === undefined) return go()
  const hold = d.hold
  const cancel = (): void => {
    if (hold !== undefined) hold.abandon()
    else clearTimeout(timer)
    abandoned?.()
  }
  const over = (): void => {
    res.off('close', cancel)
    if (!res.destroyed) return go()
    hold?.abandon()
    abandoned?.()
  }
  const timer = hold === undefined ? setTimeout(over, d.delayMs) : undefined
  res.once('close', cancel)
  hold?.then(over)
}

/** Writes a decision's answer (decision/response.ts) as it is: the HTTP transports add nothing of their own. */
export function writeDecision(res: ServerResponse, r: DecisionResponse): void {
  res.writeHead(r.status, r.headers as string[])
  res.end(r.body)
}

/** The request a reverse-proxied IncomingMessage is, its target read by readTarget (request/target.ts). */
export function inputFromRequest(
  req: Pick<IncomingMessage, 'rawHeaders' | 'url' | 'method' | 'socket'>,
  slashes: EncodedSlashes,
): RequestInput {
  // rawHeaders, not req.headers: the latter builds a whole header object on first access.
  const host = rawHeader(req.rawHeaders, 'host') ?? ''
  const t = readTarget(req.url ?? '/', host, slashes)
  return {
    method: req.method ?? 'GET',
    path: t.path,
    alsoPaths: t.alsoPaths,
    rawQuery: t.rawQuery,
    refused: t.refused,
    host,
    rawHeaders: req.rawHeaders,
    peer: req.socket.remoteAddress ?? '',
  }
}

export function sendJson(res: ServerResponse, status: number, body: object, headers?: string[]): void {
  const text = JSON.stringify(body)
  const flat = ['content-type', 'application/json', 'content-length', String(Buffer.byteLength(text)), 'cache-control', 'no-store']
  if (headers) flat.push(...headers)
  res.writeHead(status, flat)
  res.end(text)
}

/** An HTTP/1.1 response head (status line from http.STATUS_CODES, then a flat [name, value, …] list), for raw sockets. */
export function rawHead(status: number, headers: readonly string[]): string {
  let head = `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Unknown'}\r\n`
  for (let i = 0; i < headers.length; i += 2) head += `${headers[i]}: ${headers[i + 1]}\r\n`
  return `${head}\r\n`
}

/** A whole response on a raw socket, which is then closed: answers given outside a ServerResponse (client errors, upgrades). */
export function endRaw(socket: Duplex, status: number, headers: readonly string[] = [], body = ''): void {
  socket.end(rawHead(status, ['connection', 'close', 'content-length', String(Buffer.byteLength(body)), ...headers]) + body)
}

/** What Node's writeHead refuses in a reason phrase (its checkInvalidHeaderChar); llhttp lets it through. */
export const BAD_REASON = /[^\t\x20-\x7e\x80-\xff]/
let dateText = ''
let dateUntil = 0

/** The Date header's value, made once a second (as Node's own utcDate), for heads written without writeHead. */
export function utcDate(): string {
  const now = Date.now()
  if (now >= dateUntil) {
    dateText = new Date(now).toUTCString()
    dateUntil = now - (now % 1000) + 1000
  }
  return dateText
}

const TIMEOUT_CODES = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'UND_ERR_CONNECT_TIMEOUT'])

/** How a failed backend call is told, on node:http's path (proxy.ts) and the lane's (lane-exchange.ts) alike. */
export interface BackendFailure {
  /** 504 for a timeout, else 502. */
  status: 502 | 504
  /** The gateway's own answer (its JSON body) while nothing was sent. */
  answer: { error: 'backend_timeout' | 'bad_gateway'; status: 502 | 504 }
  /** The log message: before the head was sent, and once part of the answer was. */
  failed: string
  cut: string
}

export function backendFailure(code: string | undefined): BackendFailure {
  const timeout = code !== undefined && TIMEOUT_CODES.has(code)
  const status = timeout ? 504 : 502
  return {
    status,
    answer: { error: timeout ? 'backend_timeout' : 'bad_gateway', status },
    failed: timeout ? 'backend timed out' : 'backend unreachable',
    cut: timeout ? 'response aborted: backend body timed out' : 'response aborted: backend connection lost mid-body',
  }
}
