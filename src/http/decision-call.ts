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
 * whichever proxy sends it. A header that says what the request was must be single (single()).
 */
import { AmbiguousRequest } from '../errors.js'
import { normaliseHost } from '../request/normalise.js'
import { sameHeaderName } from '../request/raw-headers.js'
import { type EncodedSlashes, readTarget, type TargetParts, targetAuthority } from '../request/target.js'
import type { RequestInput } from '../request/view.js'

export const DECISION_PATH = '/v1/decision'

/** The parts of a decision call that describe the request (an IncomingMessage has them all). */
export interface DecisionCall {
  method: string | undefined
  url: string | undefined
  rawHeaders: readonly string[]
  peer: string
}

/**
 * The one value of a header that says what the request was ('' read as absent). A proxy that
 * appends its X-Original-URI to one the client sent would otherwise hand over two, and whichever
 * the gateway took, the client could choose the path, method or host that is limited.
 */
function single(raw: readonly string[], name: string): string | undefined {
  let out: string | undefined
  for (let i = 0; i < raw.length; i += 2) {
    if (!sameHeaderName(raw[i]!, name)) continue
    if (out === undefined) out = raw[i + 1]!
    else if (raw[i + 1] !== out) throw new AmbiguousRequest(`the header ${name} is repeated with different values`)
  }
  return out || undefined
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

interface Described extends TargetParts {
  method: string
  host: string
}

/**
 * A target with its host: without a host header of its own, an absolute URI's authority, else
 * the Host of the call (read only then: a call's Host is not its description otherwise).
 */
function described(
  method: string | undefined,
  uri: string | undefined,
  host: string | undefined,
  callHost: () => string | undefined,
  slashes: EncodedSlashes,
): Described {
  const u = uri ?? '/'
  const h = host ?? targetAuthority(u) ?? callHost() ?? ''
  return { method: method ?? 'GET', host: h, ...readTarget(u, h, slashes) }
}

function sameRequest(a: Described, b: Described): boolean {
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
  const raw = call.rawHeaders
  const url = call.url ?? DECISION_PATH
  const callHost = (): string | undefined => single(raw, 'host')
  let d: Described
  if (url.length > DECISION_PATH.length && url.charCodeAt(DECISION_PATH.length) === 47 /* / */) {
    d = described(call.method, url.slice(DECISION_PATH.length), callHost(), callHost, slashes)
  } else {
    const oMethod = single(raw, 'x-original-method')
    const oUri = single(raw, 'x-original-uri')
    const oHost = single(raw, 'x-original-host')
    const fMethod = oneItem(single(raw, 'x-forwarded-method'), 'x-forwarded-method')
    const fUri = single(raw, 'x-forwarded-uri')
    const forwardAuth = fMethod !== undefined || fUri !== undefined
    const fHost = forwardAuth ? oneItem(single(raw, 'x-forwarded-host'), 'x-forwarded-host') : undefined
    const forwarded = forwardAuth ? described(fMethod, fUri, fHost, callHost, slashes) : undefined
    if (oMethod === undefined && oUri === undefined && oHost === undefined)
      d = forwarded ?? described(undefined, undefined, undefined, callHost, slashes)
    else {
      d = described(oMethod, oUri, oHost, callHost, slashes)
      if (forwarded !== undefined && !sameRequest(d, forwarded))
        throw new AmbiguousRequest('X-Original-* and X-Forwarded-* describe different requests')
    }
  }
  const { method, host, ...target } = d
  return { method, ...target, host, rawHeaders: raw, peer: call.peer }
}
