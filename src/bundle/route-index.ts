/**
 * Route index for selectors, built once per bundle. Exact paths are a Map
 * lookup; prefixes are matched by segments (docs/behaviour.md §2): a normalised prefix
 * `/a/b/` matches a path that starts with it and goes on past it, so the
 * candidate prefixes of `/a/b/c` are `/`, `/a/` and `/a/b/`, each one Map
 * lookup. Method and host filters run only on the candidates.
 *
 * Paths compare case-insensitively, and a pathExact with or without its
 * trailing slash, unless the selector asks otherwise (`pathCaseSensitive`,
 * `pathTrailingSlashSensitive`): Express, ASP.NET and many routers route
 * `/API/x/` where `/api/x` goes, so an exact, case-true comparison would be
 * a limit a client walks around by spelling.
 */
export interface Routable {
  /** Position in policy-id sort order; results come back in this order. */
  ordinal: number
  methods: ReadonlySet<string> | undefined
  hosts: ReadonlySet<string> | undefined
  pathExact: string | undefined
  /** Normalised to end in `/`. */
  pathPrefix: string | undefined
  /** The selector's pathCaseSensitive (absent: false). */
  caseSensitive?: boolean
  /** The selector's pathTrailingSlashSensitive (absent: false): pathExact `/a` then matches `/a` only, not `/a/`. */
  trailingSlashSensitive?: boolean
}

export function normalisePrefix(prefix: string): string {
  return prefix.endsWith('/') ? prefix : `${prefix}/`
}

/** `p` without its trailing `/` (`/` itself stays). */
function trimSlash(p: string): string {
  return p.length > 1 && p.charCodeAt(p.length - 1) === 47 ? p.slice(0, -1) : p
}

/** A path as a default selector (and a kill-switch route) compares it: lower case, no trailing `/`. */
export function foldPath(p: string): string {
  return trimSlash(p.toLowerCase())
}

/** The exact paths of the policies with one combination of the two options, by their folded form. */
interface ExactTable<P> {
  caseSensitive: boolean
  trailingSlashSensitive: boolean
  map: Map<string, P[]>
}

export class RouteIndex<P extends Routable> {
  private readonly exact: ExactTable<P>[] = []
  private readonly prefix = new Map<string, P[]>()
  /** Prefixes of case-insensitive selectors, lower-cased. */
  private readonly prefixFolded = new Map<string, P[]>()
  private readonly hostless: boolean

  constructor(policies: readonly P[]) {
    const add = (m: Map<string, P[]>, k: string, p: P): void => {
      const list = m.get(k)
      if (list) list.push(p)
      else m.set(k, [p])
    }
    for (const p of policies) {
      const cs = p.caseSensitive === true
      if (p.pathExact !== undefined) {
        const ts = p.trailingSlashSensitive === true
        let t = this.exact.find((x) => x.caseSensitive === cs && x.trailingSlashSensitive === ts)
        if (t === undefined) this.exact.push((t = { caseSensitive: cs, trailingSlashSensitive: ts, map: new Map() }))
        add(t.map, exactKey(p.pathExact, cs, ts), p)
      }
      if (p.pathPrefix !== undefined) {
        if (cs) add(this.prefix, p.pathPrefix, p)
        else add(this.prefixFolded, p.pathPrefix.toLowerCase(), p)
      }
    }
    this.hostless = policies.every((p) => p.hosts === undefined)
  }

  /**
   * Policies whose selector matches `path` or one of `also` (the other
   * readings of the same request path), in policy-id order. `host` must be normalised.
   */
  match(method: string, path: string, host: string, also?: readonly string[]): P[] {
    const out: P[] = []
    this.collect(method, path, host, out)
    if (also !== undefined) for (const a of also) this.collect(method, a, host, out)
    if (out.length > 1) out.sort((a, b) => a.ordinal - b.ordinal)
    return out
  }

  private collect(method: string, path: string, host: string, out: P[]): void {
    let lower: string | undefined
    const exact = this.exact
    for (let i = 0; i < exact.length; i++) {
      const t = exact[i]!
      const k = t.caseSensitive ? path : (lower ??= path.toLowerCase())
      this.push(t.map.get(t.trailingSlashSensitive ? k : trimSlash(k)), method, host, out)
    }
    if (this.prefix.size) this.prefixes(path, this.prefix, method, host, out)
    if (this.prefixFolded.size) this.prefixes(lower ?? path.toLowerCase(), this.prefixFolded, method, host, out)
  }

  private prefixes(path: string, m: Map<string, P[]>, method: string, host: string, out: P[]): void {
    this.push(m.get('/'), method, host, out)
    for (let i = path.indexOf('/', 1); i !== -1 && i < path.length - 1; i = path.indexOf('/', i + 1))
      this.push(m.get(path.slice(0, i + 1)), method, host, out)
  }

  /** The policies of `list` whose methods and hosts admit the request, added to `out` once each. */
  private push(list: P[] | undefined, method: string, host: string, out: P[]): void {
    if (list === undefined) return
    for (const p of list) {
      if (p.methods !== undefined && !p.methods.has(method)) continue
      if (!this.hostless && p.hosts !== undefined && !p.hosts.has(host)) continue
      if (!out.includes(p)) out.push(p)
    }
  }
}

function exactKey(exact: string, caseSensitive: boolean, trailingSlashSensitive: boolean): string {
  const k = caseSensitive ? exact : exact.toLowerCase()
  return trailingSlashSensitive ? k : trimSlash(k)
}
