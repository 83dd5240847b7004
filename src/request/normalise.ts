/**
 * How a request's host and path are put in the one form that selectors, kill
 * switches and the jitter identity compare (docs/behaviour.md §2): what a
 * client can spell several ways must not match differently.
 */

export function normaliseHost(raw: string): string {
  let h = raw.trim().toLowerCase()
  if (h.startsWith('[')) {
    const end = h.indexOf(']')
    h = end > 0 ? h.slice(0, end + 1) : h
  } else {
    const colon = h.indexOf(':')
    if (colon !== -1) h = h.slice(0, colon)
  }
  while (h.endsWith('.')) h = h.slice(0, -1)
  return h
}

/**
 * An escaped `/` or `\` (`%2F`, `%5C`) in a path: `reject` refuses the
 * request (400 `encoded_slash`), `decode` reads it as a separator (as nginx's
 * `$uri` does), `keep` leaves it escaped, part of its segment (as Express,
 * WHATWG URL and most routers do).
 */
export type EncodedSlashes = 'reject' | 'decode' | 'keep'

/** The paths one request path is counted as: `path` first (the one forwarded), then any other reading. */
export interface PathReading {
  path: string
  /** Other paths a common backend routes the same text to; undefined for nearly every request. */
  also: readonly string[] | undefined
  /** The path has an escaped slash and FAIRVISOR_ENCODED_SLASHES is `reject`. */
  refused: boolean
}

const UNRESERVED = /[A-Za-z0-9\-._~]/

/**
 * The readings of a request path (without query or fragment) that selectors
 * match: what nginx (`$uri`), WHATWG URL, Node's `url.parse` and
 * Tomcat/Spring route the text to, so no spelling walks around a policy
 * (docs/behaviour.md §2):
 *
 * - `path`: `\` is `/` (WHATWG URL, `url.parse`); escaped unreserved
 *   characters are decoded (RFC 3986 §6.2.2.2); an escaped `/` or `\` as
 *   `slashes` says; runs of `/` collapse (nginx merge_slashes); dot segments
 *   are resolved (RFC 3986 §5.2.4), `..` never climbing above `/`;
 * - also, when a segment carries `;` parameters, the same with them removed
 *   (Tomcat and Spring strip them before routing, so `/x/..;/admin` reaches
 *   `/admin` there and `/x/..;/admin` under nginx);
 * - also, when the path starts with `//`, what WHATWG URL reads: the first
 *   segment is a host, the rest the path (`new URL('//h/admin', base)` is `/admin`).
 *
 * Ordinary paths (none of `%`, `\`, `;`, `//`, a dot segment) skip all of it in one scan.
 */
export function readPath(raw: string, slashes: EncodedSlashes): PathReading {
  if (isPlain(raw)) return { path: raw, also: undefined, refused: false }
  const base = raw.indexOf('\\') === -1 ? raw : raw.replace(/\\/g, '/')
  if (slashes === 'reject' && /%(?:2f|5c)/i.test(base)) return { path: canonical(base, 'keep'), also: undefined, refused: true }
  const path = canonical(base, slashes)
  const readings = new Set<string>()
  if (base.includes(';')) readings.add(canonical(withoutParams(base), slashes))
  if (base.startsWith('//')) {
    const rest = afterAuthority(base)
    readings.add(canonical(rest, slashes))
    if (rest.includes(';')) readings.add(canonical(withoutParams(rest), slashes))
  }
  readings.delete(path)
  return { path, also: readings.size === 0 ? undefined : [...readings], refused: false }
}

/**
 * No `%`, `\`, `;`, `//` or dot segment: the path is its only reading, as
 * written. One pass of character codes, no regular expression or copy (this
 * runs on every request).
 */
function isPlain(p: string): boolean {
  if (p.charCodeAt(0) !== 47 /* / */) return true // `*` (OPTIONS): nothing to read
  for (let i = 0; i < p.length; i++) {
    const c = p.charCodeAt(i)
    if (c === 37 /* % */ || c === 92 /* \ */ || c === 59 /* ; */) return false
    if (c !== 47) continue
    const next = p.charCodeAt(i + 1)
    if (next === 47) return false
    if (next !== 46 /* . */) continue
    // `/.` or `/..` as a whole segment (followed by `/` or the end).
    const after = p.charCodeAt(i + 2) === 46 ? i + 3 : i + 2
    if (after === p.length || p.charCodeAt(after) === 47) return false
  }
  return true
}

/** `p` without the `;` parameters of its segments (`/a;x=1/b;y` → `/a/b`). */
function withoutParams(p: string): string {
  return p.replace(/;[^/]*/g, '')
}

/** WHATWG URL's reading of `//host/rest`: every leading `/` and the host dropped, `/rest` kept. */
function afterAuthority(p: string): string {
  let i = 0
  while (p.charCodeAt(i) === 47) i++
  const slash = p.indexOf('/', i)
  return slash === -1 ? '/' : p.slice(slash)
}

/** Escapes decoded, slash runs collapsed, dot segments resolved; `p` starts with `/` and has no `\`. */
function canonical(raw: string, slashes: EncodedSlashes): string {
  let p = raw
  if (p.includes('%')) {
    p = p.replace(/%([0-9A-Fa-f]{2})/g, (all, hex: string) => {
      const c = String.fromCharCode(parseInt(hex, 16))
      if (UNRESERVED.test(c)) return c
      if (slashes === 'decode' && (c === '/' || c === '\\')) return '/'
      return all.toUpperCase()
    })
  }
  p = p.replace(/\/{2,}/g, '/')
  const out: string[] = []
  const segs = p.split('/')
  for (let i = 1; i < segs.length; i++) {
    const s = segs[i]!
    const last = i === segs.length - 1
    if (s === '.' || s === '..') {
      if (s === '..' && out.length > 0) out.pop()
      if (last) out.push('') // `/a/b/..` is the directory `/a/`
    } else out.push(s)
  }
  return `/${out.join('/')}`
}
