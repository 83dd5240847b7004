/**
 * What common backends route a request-target to, for the path property test
 * (test/property/paths.test.ts): WHATWG URL, Node's url.parse, Express, nginx's
 * `$uri` (a transcription of ngx_http_parse_complex_uri, src/http/ngx_http_parse.c,
 * merge_slashes on, not Win32) and Tomcat with its defaults. Each returns the
 * path the backend routes, or null where it answers 400.
 */
import { parse as urlParse } from 'node:url'

/** The path Express, Tomcat and the property test are about. */
export const TARGET = '/api/expensive'

export function whatwg(t: string): string | null {
  try {
    return new URL(t, 'http://h').pathname
  } catch {
    return null
  }
}

export function nodeUrlParse(t: string): string | null {
  return urlParse(t).pathname
}

/** nginx's `usual` table (ngx_http_parse.c, not Win32): characters copied as they are. */
const USUAL = [0x00000000, 0x7fff37d6, 0xffffffff, 0x7fffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff]
const isUsual = (ch: number): boolean => (USUAL[ch >> 5]! & (1 << (ch & 0x1f))) !== 0

/**
 * nginx's `$uri` for an origin-form target, or null where nginx answers 400:
 * ngx_http_parse_request_line refuses bytes ≤ 0x20 and 0x7f; then
 * ngx_http_parse_complex_uri, state by state (merge_slashes on). An escape
 * is decoded and the decoded character handled in the state it arrived in,
 * so `%2F` is a separator and `%2E` a dot; `%25`, `%23` and `%3F` are kept
 * literally; `#` ends the path, `?` starts the arguments; `..` above `/` is 400.
 */
export function nginxUri(target: string): string | null {
  if (target[0] !== '/') return null
  for (let k = 0; k < target.length; k++) {
    const c = target.charCodeAt(k)
    if (c <= 0x20 || c === 0x7f) return null
  }
  const p = `${target}\n` // "after the URI there is always at least one character: the line feed"
  const end = target.length
  const out: number[] = []
  let u = 0
  let i = 0
  let ch = p.charCodeAt(i++)
  type S = 'usual' | 'slash' | 'dot' | 'dot_dot' | 'quoted' | 'quoted_second'
  let state: S = 'usual'
  let quotedState: S = 'usual'
  let decoded = 0
  const SLASH = 47
  const DOT = 46
  const back = (): boolean => {
    // u -= 4, then back to the previous '/' (sw_dot_dot)
    u -= 4
    for (;;) {
      if (u < 0) return false
      if (out[u] === SLASH) {
        u++
        return true
      }
      u--
    }
  }
  const result = (): string => String.fromCharCode(...out.slice(0, u))
  while (i <= end) {
    switch (state) {
      case 'usual':
        if (isUsual(ch)) {
          out[u++] = ch
          ch = p.charCodeAt(i++)
          break
        }
        if (ch === SLASH) {
          state = 'slash'
          out[u++] = ch
        } else if (ch === 37 /* % */) {
          quotedState = state
          state = 'quoted'
        } else if (ch === 63 /* ? */) return result()
        else if (ch === 35 /* # */) return result()
        else out[u++] = ch // '.', '+', and the rest
        ch = p.charCodeAt(i++)
        break
      case 'slash':
        if (isUsual(ch)) {
          state = 'usual'
          out[u++] = ch
          ch = p.charCodeAt(i++)
          break
        }
        if (ch === SLASH) {
          // merge_slashes: not written
        } else if (ch === DOT) {
          state = 'dot'
          out[u++] = ch
        } else if (ch === 37) {
          quotedState = state
          state = 'quoted'
        } else if (ch === 63 || ch === 35) return result()
        else {
          state = 'usual'
          out[u++] = ch
        }
        ch = p.charCodeAt(i++)
        break
      case 'dot':
        if (isUsual(ch)) {
          state = 'usual'
          out[u++] = ch
          ch = p.charCodeAt(i++)
          break
        }
        if (ch === SLASH) {
          state = 'slash'
          u--
        } else if (ch === DOT) {
          state = 'dot_dot'
          out[u++] = ch
        } else if (ch === 37) {
          quotedState = state
          state = 'quoted'
        } else if (ch === 63 || ch === 35) {
          u--
          return result()
        } else {
          state = 'usual'
          out[u++] = ch
        }
        ch = p.charCodeAt(i++)
        break
      case 'dot_dot':
        if (isUsual(ch)) {
          state = 'usual'
          out[u++] = ch
          ch = p.charCodeAt(i++)
          break
        }
        if (ch === SLASH || ch === 63 || ch === 35) {
          if (!back()) return null
          if (ch !== SLASH) return result()
          state = 'slash'
        } else if (ch === 37) {
          quotedState = state
          state = 'quoted'
        } else {
          state = 'usual'
          out[u++] = ch
        }
        ch = p.charCodeAt(i++)
        break
      case 'quoted': {
        const h = Number.parseInt(String.fromCharCode(ch), 16)
        if (Number.isNaN(h)) return null
        decoded = h
        state = 'quoted_second'
        ch = p.charCodeAt(i++)
        break
      }
      case 'quoted_second': {
        const h = Number.parseInt(String.fromCharCode(ch), 16)
        if (Number.isNaN(h)) return null
        ch = (decoded << 4) + h
        if (ch === 37 || ch === 35 || ch === 63) {
          // `%25`, `%23`, `%3F`: the character itself, never its meaning
          state = 'usual'
          out[u++] = ch
          ch = p.charCodeAt(i++)
        } else if (ch === 0) return null
        else state = quotedState // the decoded character is handled in the state it arrived in
        break
      }
    }
  }
  if (state === 'quoted' || state === 'quoted_second') return null
  if (state === 'dot') u--
  else if (state === 'dot_dot' && !back()) return null
  return result()
}

/** Tomcat (and Spring on it) with its defaults: what the servlet is chosen by, or null for a 400. */
export function tomcat(target: string): string | null {
  let t = target
  for (const stop of ['#', '?']) if (t.includes(stop)) t = t.slice(0, t.indexOf(stop))
  if (t.includes('\\')) return null // ALLOW_BACKSLASH=false
  t = t.replace(/;[^/]*/g, '') // parsePathParameters
  if (/%(2f|5c)/i.test(t)) return null // encodedSolidusHandling=reject
  try {
    t = decodeURIComponent(t)
  } catch {
    return null
  }
  t = t.replace(/\/{2,}/g, '/')
  const out: string[] = []
  const segs = t.split('/')
  for (let k = 1; k < segs.length; k++) {
    const s = segs[k]!
    if (s === '.') {
      if (k === segs.length - 1) out.push('')
    } else if (s === '..') {
      if (out.length === 0) return null // above the root: 400
      out.pop()
      if (k === segs.length - 1) out.push('')
    } else out.push(s)
  }
  return `/${out.join('/')}`
}

/** Express: url.parse's pathname, routed case-insensitively with an optional trailing slash. */
export function expressRoutes(t: string): boolean {
  const p = nodeUrlParse(t)?.toLowerCase()
  return p === TARGET || p === `${TARGET}/`
}
