/**
 * FAIRVISOR_STORE → where Redis is. Forms:
 *   redis://[user:pass@]host:port[/db]        plain TCP
 *   rediss://[user:pass@]host:port[/db]       TLS (server name = host)
 *   unix:///path/to/redis.sock[?db=N]         Unix socket (a bare /path works too)
 *   redis+cluster://[user:pass@]h1:p1,h2:p2   Redis Cluster seed nodes
 * A malformed value throws SettingError naming FAIRVISOR_STORE.
 */
import { isIP } from 'node:net'
import { SettingError } from '../../errors.js'

const VAR = 'FAIRVISOR_STORE'

export interface RedisTarget {
  kind: 'standalone' | 'cluster'
  /** TCP host/port (standalone) */
  host?: string
  port?: number
  /** Unix socket path (standalone) */
  path?: string
  db: number
  username?: string
  password?: string
  tls: boolean
  /** Seed nodes (cluster) */
  nodes: { host: string; port: number }[]
}

/**
 * TLS options naming the server for `rediss://`: SNI carries host names only
 * (RFC 6066; Node warns, DEP0123). Without it Node still checks the
 * certificate against the host, an IP against its IP SANs.
 */
export function sniFor(host: string | undefined): { servername?: string } {
  return host !== undefined && isIP(host) === 0 ? { servername: host } : {}
}

function bad(raw: string, why: string): SettingError {
  return new SettingError(VAR, `"${raw}" ${why}`)
}

function port(raw: string, text: string | undefined, dflt = 6379): number {
  if (text === undefined || text === '') return dflt
  const n = /^\d+$/.test(text) ? Number(text) : NaN
  if (!(n >= 1 && n <= 65535)) throw bad(raw, `has a bad port "${text}"; use 1 to 65535`)
  return n
}

function db(raw: string, text: string | null | undefined): number {
  if (text === undefined || text === null || text === '') return 0
  if (!/^\d+$/.test(text)) throw bad(raw, `has a bad database number "${text}"; use an integer ≥ 0`)
  return Number(text)
}

function hostPort(raw: string, part: string): { host: string; port: number } {
  const m = /^(\[[^\]]+\]|[^:/]+)(?::(\d*))?$/.exec(part)
  if (!m) throw bad(raw, `has a bad node "${part}"; use host:port`)
  return { host: m[1]!.replace(/^\[|\]$/g, ''), port: port(raw, m[2]) }
}

export function parseRedisUrl(raw: string): RedisTarget {
  const base = { db: 0, tls: false, nodes: [] as { host: string; port: number }[] }
  if (raw.startsWith('/')) return { ...base, kind: 'standalone', path: raw }
  if (raw.startsWith('unix://')) {
    const rest = raw.slice('unix://'.length)
    const q = rest.indexOf('?')
    const path = decodeURIComponent(q === -1 ? rest : rest.slice(0, q))
    if (!path.startsWith('/')) throw bad(raw, 'needs an absolute socket path, e.g. unix:///run/redis/redis.sock')
    const params = new URLSearchParams(q === -1 ? '' : rest.slice(q + 1))
    return { ...base, kind: 'standalone', path, db: db(raw, params.get('db')), password: params.get('password') ?? undefined }
  }
  if (raw.startsWith('redis+cluster://')) {
    let rest = raw.slice('redis+cluster://'.length).replace(/\/$/, '')
    let username: string | undefined
    let password: string | undefined
    const at = rest.lastIndexOf('@')
    if (at !== -1) {
      const auth = rest.slice(0, at)
      rest = rest.slice(at + 1)
      const colon = auth.indexOf(':')
      username = decodeURIComponent(colon === -1 ? auth : auth.slice(0, colon)) || undefined
      password = colon === -1 ? undefined : decodeURIComponent(auth.slice(colon + 1))
    }
    const nodes = rest
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean)
      .map((p) => hostPort(raw, p))
    if (nodes.length === 0) throw bad(raw, 'names no node; use redis+cluster://host1:port,host2:port')
    return { ...base, kind: 'cluster', nodes, username, password }
  }
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    throw bad(raw, 'is not a URL; use redis://[user:pass@]host:port[/db]')
  }
  if (url.protocol !== 'redis:' && url.protocol !== 'rediss:') throw bad(raw, 'must use redis://, rediss://, unix:// or redis+cluster://')
  if (!url.hostname) throw bad(raw, 'names no host')
  const path = url.pathname.replace(/^\//, '')
  return {
    ...base,
    kind: 'standalone',
    host: url.hostname.replace(/^\[|\]$/g, ''),
    port: port(raw, url.port),
    db: db(raw, path),
    username: url.username ? decodeURIComponent(url.username) : undefined,
    password: url.password ? decodeURIComponent(url.password) : undefined,
    tls: url.protocol === 'rediss:',
  }
}
