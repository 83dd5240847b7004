/**
 * A request-target as the gateway reads it, the same way in every mode
 * (docs/behaviour.md §2): the reverse proxy's request line, the decision
 * API's X-Original-URI and Envoy's ext_authz `path` all come through here,
 * so one spelling is read alike whichever way the request arrives.
 */
import { type EncodedSlashes, normaliseHost, readPath } from './normalise.js'

export type { EncodedSlashes }

/** What the proxy sends the backend: the path it matched (`normalised`) or the client's own (`original`). */
export type ForwardPath = 'normalised' | 'original'

export interface PathSettings {
  /** FAIRVISOR_ENCODED_SLASHES */
  encodedSlashes: EncodedSlashes
  /** FAIRVISOR_FORWARD_PATH */
  forwardPath: ForwardPath
}

/** Why a request is refused before any policy is consulted (400). */
export type TargetRefusal = 'encoded_slash' | 'host_mismatch'

/** The parts of a request's input (RequestInput, view.ts) a target gives. */
export interface TargetParts {
  /** Normalised, without the query string: what the path selectors match first and the proxy forwards. */
  path: string
  /** Other readings of the same path a backend may route it to; matched too. */
  alsoPaths?: readonly string[]
  /** Query string without `?` ('' when none). */
  rawQuery: string
  /** Set when the target is refused (400) before any policy is consulted. */
  refused?: TargetRefusal
}

const ABSOLUTE = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/([^/?#]*)/

/**
 * `raw` split and read: a fragment is dropped (a client may send `#x`; no
 * backend routes on it), the query split off, the path read (normalise.ts).
 * An absolute-form target (`http://a.example/x`) loses its scheme and
 * authority, and is refused (`host_mismatch`) when the authority is not
 * `host`: RFC 9112 §3.2 makes a client send a Host identical to it, nginx
 * and RFC 9112 §3.2.2 route on the authority, Node frameworks on Host; a
 * request on which they disagree is refused rather than guessed.
 */
export function readTarget(raw: string, host: string, slashes: EncodedSlashes): TargetParts {
  let t = raw
  const hash = t.indexOf('#')
  if (hash !== -1) t = t.slice(0, hash)
  let refused: TargetRefusal | undefined
  if (t.charCodeAt(0) !== 47 /* / */ && t !== '*') {
    const m = ABSOLUTE.exec(t)
    if (m) {
      if (normaliseHost(m[1]!) !== normaliseHost(host)) refused = 'host_mismatch'
      t = t.slice(m[0].length)
    }
    if (t.charCodeAt(0) !== 47 && t !== '*') t = `/${t}` // a relative target, as WHATWG URL resolves it against `/`
  }
  const q = t.indexOf('?')
  const r = readPath(q === -1 ? t : t.slice(0, q), slashes)
  return {
    path: r.path,
    alsoPaths: r.also,
    rawQuery: q === -1 ? '' : t.slice(q + 1),
    refused: refused ?? (r.refused ? 'encoded_slash' : undefined),
  }
}

/** The authority of an absolute-form target (`http://a.example/x` → `a.example`), else undefined. */
export function targetAuthority(raw: string): string | undefined {
  return raw.charCodeAt(0) === 47 ? undefined : ABSOLUTE.exec(raw)?.[1]
}

/**
 * The request-target the proxy sends for a request whose target was `url`
 * and which was read as `input`: always origin-form and without fragment;
 * `normalised`, the path selectors matched first (so backend and gateway
 * agree) with the query as received; `original`, the client's path and query.
 * When reading changed nothing, `url` itself (no copy on the hot path).
 */
export function forwardTarget(url: string, input: TargetParts, mode: ForwardPath): string {
  const path = input.path
  const q = input.rawQuery
  if (url.length === path.length + (q === '' ? 0 : q.length + 1) && url.startsWith(path)) return url
  if (mode === 'normalised') return q === '' ? path : `${path}?${q}`
  let t = url
  const hash = t.indexOf('#')
  if (hash !== -1) t = t.slice(0, hash)
  const m = t.charCodeAt(0) === 47 ? null : ABSOLUTE.exec(t)
  if (m) t = t.slice(m[0].length)
  return t.charCodeAt(0) === 47 || t === '*' ? t : `/${t}`
}
