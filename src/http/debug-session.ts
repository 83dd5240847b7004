/**
 * Debug sessions (docs/behaviour.md §8): an operator who knows FAIRVISOR_DEBUG_SESSION_SECRET
 * gets a signed, short-lived cookie; requests carrying it are answered with
 * the decision's inner workings as X-Fairvisor-Debug-* headers. The cookie is
 * stateless (expiry + HMAC), so every gateway process holding the same secret
 * accepts it.
 */
import { createHash, createHmac, timingSafeEqual } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { sendJson } from './respond.js'
import type { Handler } from './server.js'
import { rawHeader } from '../request/raw-headers.js'

export const DEBUG_COOKIE = 'fv_dbg'
/** Session lifetime in seconds (the cookie's Max-Age). */
export const DEBUG_SESSION_S = 900

export interface DebugSessions {
  /** Routes for /v1/debug/session and /v1/debug/logout. */
  routes: ReadonlyMap<string, Handler>
  /** True when the request holds a valid, unexpired session cookie. */
  active(req: Pick<IncomingMessage, 'rawHeaders'>): boolean
}

function sign(secret: string, expiry: string): string {
  return createHmac('sha256', secret).update(expiry).digest('base64url')
}

/** Value of one cookie from a Cookie header, without allocating a parsed map. */
function cookieValue(header: string, name: string): string | undefined {
  let i = 0
  while (i < header.length) {
    const semi = header.indexOf(';', i)
    const end = semi === -1 ? header.length : semi
    const eq = header.indexOf('=', i)
    if (eq !== -1 && eq < end && header.slice(i, eq).trim() === name) return header.slice(eq + 1, end).trim()
    i = end + 1
  }
  return undefined
}

/** Constant-time comparison of two strings of any length (compares their SHA-256 digests). */
function sameSecret(given: string, secret: string): boolean {
  const a = createHash('sha256').update(given).digest()
  const b = createHash('sha256').update(secret).digest()
  return timingSafeEqual(a, b)
}

function methodNotAllowed(res: ServerResponse): void {
  sendJson(res, 405, { error: 'method_not_allowed' }, ['allow', 'POST'])
}

/** `nowMs` is the gateway clock (epoch ms). */
export function createDebugSessions(secret: string | undefined, nowMs: () => number): DebugSessions {
  const notFound: Handler = (_req, res) => sendJson(res, 404, { error: 'not_found' })
  if (secret === undefined) {
    // Debug sessions are off: the endpoints do not exist and no request is ever "in session".
    return {
      routes: new Map([
        ['/v1/debug/session', notFound],
        ['/v1/debug/logout', notFound],
      ]),
      active: () => false,
    }
  }

  const login: Handler = (req, res) => {
    if (req.method !== 'POST') return methodNotAllowed(res)
    const given = req.headers['x-fairvisor-debug-secret']
    if (typeof given !== 'string' || !sameSecret(given, secret)) return sendJson(res, 403, { error: 'debug_secret_invalid' })
    const expiry = String(Math.floor(nowMs() / 1000) + DEBUG_SESSION_S)
    res.writeHead(204, [
      'set-cookie',
      `${DEBUG_COOKIE}=${expiry}.${sign(secret, expiry)}; Path=/; Max-Age=${DEBUG_SESSION_S}; HttpOnly; Secure; SameSite=Strict`,
      'cache-control',
      'no-store',
    ])
    res.end()
  }

  const logout: Handler = (req, res) => {
    if (req.method !== 'POST') return methodNotAllowed(res)
    res.writeHead(204, [
      'set-cookie',
      `${DEBUG_COOKIE}=; Path=/; Max-Age=0; HttpOnly; Secure; SameSite=Strict`,
      'cache-control',
      'no-store',
    ])
    res.end()
  }

  const active = (req: Pick<IncomingMessage, 'rawHeaders'>): boolean => {
    // Hot path: a request without any cookie costs one scan of rawHeaders (req.headers would build a whole object).
    const header = rawHeader(req.rawHeaders, 'cookie')
    if (header === undefined) return false
    const value = cookieValue(header, DEBUG_COOKIE)
    if (value === undefined) return false
    const dot = value.indexOf('.')
    if (dot <= 0) return false
    const expiry = value.slice(0, dot)
    if (!/^\d{1,12}$/.test(expiry) || Number(expiry) * 1000 <= nowMs()) return false
    const given = Buffer.from(value.slice(dot + 1))
    const want = Buffer.from(sign(secret, expiry))
    return given.length === want.length && timingSafeEqual(given, want)
  }

  return {
    routes: new Map([
      ['/v1/debug/session', login],
      ['/v1/debug/logout', logout],
    ]),
    active,
  }
}
