/**
 * How a request's host and path are put in the one form that selectors, kill
 * switches and the jitter identity compare (docs/behaviour.md §2–3): what a
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

const UNRESERVED = /[A-Za-z0-9\-._~]/

/**
 * The path selectors, kill-switch routes and the jitter identity see. A raw
 * `/public/../admin/x`, `//admin/x` or `/%61dmin/x` reaches most backends as
 * `/admin/x`, so matching the raw text would let a client walk around a
 * `/admin/` policy; nginx, which Fairvisor ran in, matched on its
 * normalised $uri too. So: absolute-form targets lose their scheme and
 * authority, percent-encoded unreserved characters are decoded (RFC 3986
 * §6.2.2.2; `%2F` stays, it is not a separator), runs of `/` collapse and
 * dot segments are resolved (RFC 3986 §5.2.4). Ordinary paths skip all of it.
 */
export function normalisePath(raw: string): string {
  let p = raw
  if (p.charCodeAt(0) !== 47 /* / */) {
    const m = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/]*/.exec(p)
    if (!m) return p // `*` (OPTIONS) and other forms: nothing to normalise
    p = p.slice(m[0].length) || '/'
  }
  // Ordinary paths: three substring scans, no regular expression (this runs on every request).
  if (p.indexOf('%') === -1 && p.indexOf('//') === -1 && !hasDotSegment(p)) return p
  p = p.replace(/%([0-9A-Fa-f]{2})/g, (all, hex: string) => {
    const c = String.fromCharCode(parseInt(hex, 16))
    return UNRESERVED.test(c) ? c : all.toUpperCase()
  })
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

/** `/.` or `/..` as a whole segment (followed by `/` or the end). */
function hasDotSegment(p: string): boolean {
  for (let i = p.indexOf('/.'); i !== -1; i = p.indexOf('/.', i + 1)) {
    const next = p.charCodeAt(i + 2) === 46 /* . */ ? i + 3 : i + 2
    if (next === p.length || p.charCodeAt(next) === 47 /* / */) return true
  }
  return false
}
