/**
 * Route index for selectors, built once per bundle. Exact paths are a Map
 * lookup; prefixes are matched by segments (docs/behaviour.md §2): a normalised prefix
 * `/a/b/` matches a path that starts with it and goes on past it, so the
 * candidate prefixes of `/a/b/c` are `/`, `/a/` and `/a/b/`, each one Map
 * lookup. Method and host filters run only on the candidates.
 */
export interface Routable {
  /** Position in policy-id sort order; results come back in this order. */
  ordinal: number
  methods: ReadonlySet<string> | undefined
  hosts: ReadonlySet<string> | undefined
  pathExact: string | undefined
  /** Normalised to end in `/`. */
  pathPrefix: string | undefined
}

export function normalisePrefix(prefix: string): string {
  return prefix.endsWith('/') ? prefix : `${prefix}/`
}

export class RouteIndex<P extends Routable> {
  private readonly exact = new Map<string, P[]>()
  private readonly prefix = new Map<string, P[]>()
  private readonly hostless: boolean

  constructor(policies: readonly P[]) {
    const add = (m: Map<string, P[]>, k: string, p: P): void => {
      const list = m.get(k)
      if (list) list.push(p)
      else m.set(k, [p])
    }
    for (const p of policies) {
      if (p.pathExact !== undefined) add(this.exact, p.pathExact, p)
      if (p.pathPrefix !== undefined) add(this.prefix, p.pathPrefix, p)
    }
    this.hostless = policies.every((p) => p.hosts === undefined)
  }

  /** Policies whose selector matches, in policy-id order. `host` must be normalised. */
  match(method: string, path: string, host: string): P[] {
    const out: P[] = []
    const push = (list: P[] | undefined): void => {
      if (!list) return
      for (const p of list) {
        if (p.methods !== undefined && !p.methods.has(method)) continue
        if (!this.hostless && p.hosts !== undefined && !p.hosts.has(host)) continue
        if (!out.includes(p)) out.push(p)
      }
    }
    push(this.exact.get(path))
    if (this.prefix.size) {
      push(this.prefix.get('/'))
      for (let i = path.indexOf('/', 1); i !== -1 && i < path.length - 1; i = path.indexOf('/', i + 1)) {
        push(this.prefix.get(path.slice(0, i + 1)))
      }
    }
    if (out.length > 1) out.sort((a, b) => a.ordinal - b.ordinal)
    return out
  }
}
