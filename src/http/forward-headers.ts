/**
 * Header rewriting for the reverse proxy: hop-by-hop fields dropped both
 * ways (and those a Connection header lists), X-Forwarded-* set, response
 * headers copied from undici's raw buffers without a parse/re-serialise.
 */
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http'

/** RFC 9110 §7.6.1 hop-by-hop fields, plus proxy-connection which some clients still send. */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
])
/** Replaced by the proxy itself; `expect` is answered by Node's server (100-continue). */
const REPLACED = new Set(['x-forwarded-for', 'x-forwarded-proto', 'x-forwarded-host', 'expect'])

function connectionTokens(value: string): Set<string> | undefined {
  // What nearly every peer sends: nothing to drop, no split.
  if (value === 'keep-alive' || value === 'close' || value === 'Keep-Alive' || value === 'Close') return undefined
  let out: Set<string> | undefined
  for (const t of value.split(',')) {
    const v = t.trim().toLowerCase()
    if (v && v !== 'close' && v !== 'keep-alive') (out ??= new Set()).add(v)
  }
  return out
}

/**
 * Header-name lengths that can be special (hop-by-hop, replaced, or read by the
 * proxy). Names of any other length are copied without lower-casing them, which
 * saves a string allocation per header on the hot path.
 */
const SPECIAL_LENGTH: boolean[] = []
for (const name of [...HOP_BY_HOP, ...REPLACED, 'host', 'content-length']) SPECIAL_LENGTH[name.length] = true

/** Removes from a flat [name, value, …] list the names a Connection header listed. */
function dropListed(out: string[], listed: Set<string>, from: number): void {
  for (let i = out.length - 2; i >= from; i -= 2) if (listed.has(out[i]!.toLowerCase())) out.splice(i, 2)
}

/** upstreamHeaders' answer: the request has a body (a length other than 0, or a transfer coding). */
export const HAS_BODY = 1
/** upstreamHeaders' answer: the request has a Host header. */
export const HAS_HOST = 2

/**
 * Appends the request headers for the backend to `out` as a flat
 * [name, value, …] list, in one pass over rawHeaders (req.headers is never
 * built here). Returns HAS_BODY | HAS_HOST as they apply.
 */
export function upstreamHeaders(req: Pick<IncomingMessage, 'rawHeaders' | 'socket'>, trusted: boolean, out: string[]): number {
  const raw = req.rawHeaders
  let connection: string | undefined
  let host: string | undefined
  let body = false
  let xff: string | undefined
  let xfp: string | undefined
  let xfh: string | undefined
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!
    if (SPECIAL_LENGTH[name.length] === true) {
      const lower = name.toLowerCase()
      if (HOP_BY_HOP.has(lower)) {
        if (lower === 'connection') connection = connection === undefined ? raw[i + 1] : `${connection},${raw[i + 1]}`
        else if (lower === 'transfer-encoding') body = true
        continue
      }
      if (REPLACED.has(lower)) {
        if (lower === 'x-forwarded-for') xff = xff === undefined ? raw[i + 1] : `${xff}, ${raw[i + 1]}`
        else if (lower === 'x-forwarded-proto') xfp ??= raw[i + 1]
        else if (lower === 'x-forwarded-host') xfh ??= raw[i + 1]
        continue
      }
      if (lower === 'host') host ??= raw[i + 1]
      else if (lower === 'content-length' && raw[i + 1] !== '0') body = true
    }
    out.push(name, raw[i + 1]!)
  }
  const listed = connection === undefined ? undefined : connectionTokens(connection)
  if (listed) dropListed(out, listed, 0)
  const peer = req.socket.remoteAddress ?? ''
  // Always append the peer so the backend sees the full chain; only a trusted
  // peer's claims about the original scheme and host are kept.
  out.push('x-forwarded-for', xff ? `${xff}, ${peer}` : peer)
  out.push('x-forwarded-proto', trusted && xfp ? xfp : (req.socket as { encrypted?: boolean }).encrypted ? 'https' : 'http')
  const fwdHost = trusted && xfh ? xfh : host
  if (fwdHost) out.push('x-forwarded-host', fwdHost)
  return (body ? HAS_BODY : 0) | (host === undefined ? 0 : HAS_HOST)
}

/**
 * Response headers for the client from the head undici has already parsed (names in lower case,
 * values latin1, repeated names as arrays, in arrival order), hop-by-hop removed. Copying the
 * parsed head, not the raw buffers, saves converting every name and value a second time; names
 * then reach the client in lower case, as Envoy and HAProxy send them (HTTP/2 requires it).
 */
export function downstreamFromParsed(parsed: IncomingHttpHeaders, extra: readonly string[] | undefined): string[] {
  const out: string[] = []
  let listed: Set<string> | undefined
  for (const name in parsed) {
    const v = parsed[name]
    if (v === undefined) continue
    if (SPECIAL_LENGTH[name.length] === true && HOP_BY_HOP.has(name)) {
      if (name === 'connection') listed = connectionTokens(Array.isArray(v) ? v.join(',') : v)
      continue
    }
    if (typeof v === 'string') out.push(name, v)
    else for (let i = 0; i < v.length; i++) out.push(name, v[i]!)
  }
  return withoutListed(out, listed, extra)
}

/**
 * Response headers for the client from the raw [name, value, …] strings of Node's parser (upstream.ts),
 * the same list downstreamFromParsed makes: names in lower case, a repeated name with all its values at
 * its first place, hop-by-hop removed. A backend's `Keep-Alive: timeout=<s>` lowers `hint.keepAliveMs`
 * (one second under it, as undici does), so an idle connection is not reused as the backend closes it.
 */
export function downstreamFromRaw(raw: string[], extra: readonly string[] | undefined, hint: { keepAliveMs: number }): string[] {
  const out: string[] = []
  let listed: Set<string> | undefined
  let repeated = false
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase() // no new string when the backend already sends lower case
    if (SPECIAL_LENGTH[name.length] === true && HOP_BY_HOP.has(name)) {
      if (name === 'connection') listed = connectionTokens(raw[i + 1]!)
      else if (name === 'keep-alive') keepAliveHint(raw[i + 1]!, hint)
      continue
    }
    for (let j = 0; j < out.length && !repeated; j += 2) repeated = out[j] === name
    out.push(name, raw[i + 1]!)
  }
  return withoutListed(repeated ? grouped(out) : out, listed, extra)
}

function keepAliveHint(value: string, hint: { keepAliveMs: number }): void {
  const m = /timeout=(\d+)/i.exec(value)
  if (m !== null) hint.keepAliveMs = Math.min(hint.keepAliveMs, Math.max(1000, Number(m[1]) * 1000 - 1000))
}

/** A flat list with each repeated name's pairs moved up to its first place (the order of a parsed head). */
function grouped(flat: string[]): string[] {
  const out: string[] = []
  const done = new Set<string>()
  for (let i = 0; i < flat.length; i += 2) {
    const name = flat[i]!
    if (done.has(name)) continue
    done.add(name)
    for (let j = i; j < flat.length; j += 2) if (flat[j] === name) out.push(name, flat[j + 1]!)
  }
  return out
}

/** Response headers for the client: raw buffers from undici, hop-by-hop removed (names as the backend spelled them). */
export function downstreamHeaders(raw: Buffer[], extra: readonly string[] | undefined): string[] {
  const out: string[] = []
  let listed: Set<string> | undefined
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toString('latin1')
    if (SPECIAL_LENGTH[name.length] === true) {
      const lower = name.toLowerCase()
      if (lower === 'connection') listed = connectionTokens(raw[i + 1]!.toString('latin1'))
      if (HOP_BY_HOP.has(lower)) continue
    }
    out.push(name, raw[i + 1]!.toString('latin1'))
  }
  return withoutListed(out, listed, extra)
}

/** The end of both response-header copies: the names a Connection header listed dropped, the gateway's own headers added. */
function withoutListed(out: string[], listed: Set<string> | undefined, extra: readonly string[] | undefined): string[] {
  if (listed) dropListed(out, listed, 0)
  if (extra) for (let i = 0; i < extra.length; i++) out.push(extra[i]!)
  return out
}
