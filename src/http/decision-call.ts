/**
 * The request a decision call describes (docs/integrations.md#decision-service), in whichever
 * convention the calling proxy speaks:
 *
 * - `X-Original-Method`/`-URI`/`-Host` (nginx `auth_request`, Kong): the call's own method and
 *   path say nothing about the request;
 * - `X-Forwarded-Method`/`-Uri`/`-Host` (Traefik ForwardAuth, Caddy `forward_auth`): a `GET` to
 *   `/v1/decision`, the Host of the call being the gateway's (Traefik) or the client's (Caddy);
 * - Envoy's HTTP `ext_authz` with `path_prefix: /v1/decision`: the call is the client's own
 *   method, `/v1/decision` followed by the client's path and query, and the client's Host.
 *
 * Every convention's target goes through readTarget (request/target.ts), so a path reads the same
 * whichever proxy sends it. A header that says what the request was must be single (single());
 * the lines are read in one pass (scan()), as this runs on every decision call.
 */
import { AmbiguousRequest } from '../errors.js'
import { normaliseHost } from '../request/normalise.js'
import { sameHeaderName } from '../request/raw-headers.js'
import { type EncodedSlashes, readTarget, targetAuthority } from '../request/target.js'
import type { RequestInput } from '../request/view.js'

export const DECISION_PATH = '/v1/decision'

/** The parts of a decision call that describe the request (an IncomingMessage has them all). */
export interface DecisionCall {
  method: string | undefined
  url: string | undefined
  rawHeaders: readonly string[]
  peer: string
}

/** The headers a call's description may use, in the order of their slots in Lines. */
const NAMES = [
  'host',
  'x-original-method',
  'x-original-uri',
  'x-original-host',
  'x-forwarded-method',
  'x-forwarded-uri',
  'x-forwarded-host',
] as const
const HOST = 0
const O_METHOD = 1
const O_URI = 2
const O_HOST = 3
const F_METHOD = 4
const F_URI = 5
const F_HOST = 6
/** A header sent twice with different values; refused only when it is read (a call's Host may not be). */
const CONFLICT = Symbol('conflict')
type Lines = (string | typeof CONFLICT | undefined)[]

/** The slot of a header name, by its length first: nearly every name is passed over on one comparison. */
function slotOf(name: string): number {
  switch (name.length) {
    case 4:
      return sameHeaderName(name, 'host') ? HOST : -1
    case 14:
      return sameHeaderName(name, 'x-original-uri') ? O_URI : -1
    case 15:
      return sameHeaderName(name, 'x-original-host') ? O_HOST : sameHeaderName(name, 'x-forwarded-uri') ? F_URI : -1
    case 16:
      return sameHeaderName(name, 'x-forwarded-host') ? F_HOST : -1
    case 17:
      return sameHeaderName(name, 'x-original-method') ? O_METHOD : -1
    case 18:
      return sameHeaderName(name, 'x-forwarded-method') ? F_METHOD : -1
    default:
      return -1
  }
}

/** One pass over the header lines for every header a description may use. */
function scan(raw: readonly string[]): Lines {
  const lines: Lines = [undefined, undefined, undefined, undefined, undefined, undefined, undefined]
  for (let i = 0; i < raw.length; i += 2) {
    const slot = slotOf(raw[i]!)
    if (slot === -1) continue
    const prev = lines[slot]
    if (prev === undefined) lines[slot] = raw[i + 1]!
    else if (prev !== raw[i + 1]) lines[slot] = CONFLICT
  }
  return lines
}

/**
 * The one value of a header that says what the request was ('' read as absent). A proxy that
 * appends its X-Original-URI to one the client sent would otherwise hand over two, and whichever
 * the gateway took, the client could choose the path, method or host that is limited.
 */
function single(lines: Lines, slot: number): string | undefined {
  const v = lines[slot]
  if (v === CONFLICT) throw new AmbiguousRequest(`the header ${NAMES[slot]} is repeated with different values`)
  return v || undefined
}

/**
 * A value that can never hold a comma (a method token, a host) but does: a proxy appended its own
 * to the client's (`X-Forwarded-Host: client.example, real.example`). Which one is real is the
 * calling proxy's to know, not the gateway's to guess.
 */
function oneItem(value: string | undefined, name: string): string | undefined {
  if (value?.includes(',')) throw new AmbiguousRequest(`the header ${name} holds more than one value`)
  return value
}

/**
 * The request one convention describes: without a host header of its own, an absolute URI's
 * authority is the host, else the Host of the call (read only then: a call's Host is not its
 * description otherwise). Built field by field: this runs on every decision call.
 */
function described(
  call: DecisionCall,
  lines: Lines,
  method: string | undefined,
  uri: string | undefined,
  host: string | undefined,
  slashes: EncodedSlashes,
): RequestInput {
  const u = uri ?? '/'
  const h = host ?? targetAuthority(u) ?? single(lines, HOST) ?? ''
  const t = readTarget(u, h, slashes)
  return {
    method: method ?? 'GET',
    path: t.path,
    alsoPaths: t.alsoPaths,
    rawQuery: t.rawQuery,
    refused: t.refused,
    host: h,
    rawHeaders: call.rawHeaders,
    peer: call.peer,
  }
}

function sameRequest(a: RequestInput, b: RequestInput): boolean {
  return (
    a.method === b.method &&
    a.path === b.path &&
    a.rawQuery === b.rawQuery &&
    a.refused === b.refused &&
    String(a.alsoPaths) === String(b.alsoPaths) &&
    normaliseHost(a.host) === normaliseHost(b.host)
  )
}

/**
 * The request a call describes. On `/v1/decision/<path>` (Envoy's `path_prefix`), the call itself:
 * its method, `<path>` and Host; description headers are not read there, as Envoy itself sets the
 * method, path and Host it sends. On `/v1/decision`: X-Original-* when any of them is present
 * (the convention the gateway has always read), else X-Forwarded-* when X-Forwarded-Method or
 * -Uri is present (only forward-auth proxies set those; X-Forwarded-Host alone is any proxy's).
 *
 * When a call carries both, X-Original-* is what is read, and the X-Forwarded-* request must be
 * the same one, else AmbiguousRequest: Traefik and Caddy copy the client's own headers onto the
 * call, so a client behind them could otherwise send `X-Original-URI: /cheap` beside the proxy's
 * X-Forwarded-Uri and choose the path that is limited; behind nginx, a client's X-Forwarded-Uri
 * must not change anything either. Whoever sends the conflict is refused, never believed.
 */
export function inputFromDecisionCall(call: DecisionCall, slashes: EncodedSlashes): RequestInput {
  const lines = scan(call.rawHeaders)
  const url = call.url ?? DECISION_PATH
  if (url.length > DECISION_PATH.length && url.charCodeAt(DECISION_PATH.length) === 47 /* / */)
    return described(call, lines, call.method, url.slice(DECISION_PATH.length), single(lines, HOST), slashes)
  const oMethod = single(lines, O_METHOD)
  const oUri = single(lines, O_URI)
  const oHost = single(lines, O_HOST)
  const fMethod = oneItem(single(lines, F_METHOD), 'x-forwarded-method')
  const fUri = single(lines, F_URI)
  const forwarded =
    fMethod === undefined && fUri === undefined
      ? undefined
      : described(call, lines, fMethod, fUri, oneItem(single(lines, F_HOST), 'x-forwarded-host'), slashes)
  if (oMethod === undefined && oUri === undefined && oHost === undefined)
    return forwarded ?? described(call, lines, undefined, undefined, undefined, slashes)
  const original = described(call, lines, oMethod, oUri, oHost, slashes)
  if (forwarded !== undefined && !sameRequest(original, forwarded))
    throw new AmbiguousRequest('X-Original-* and X-Forwarded-* describe different requests')
  return original
}
