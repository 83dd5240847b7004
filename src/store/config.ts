/**
 * FAIRVISOR_STORE and the store settings, parsed once (by settings.ts) into a
 * typed store config that the store factory (factory.ts) builds from. A
 * malformed URL throws a SettingError naming FAIRVISOR_STORE (exit 2).
 */
import { SettingError } from '../errors.js'
import { isPostgresUrl, parsePostgresUrl, type PostgresTarget } from './postgres/url.js'
import { parseRedisUrl, type RedisTarget } from './redis/url.js'

export type StoreConfig =
  /** In-process counters, or the table shared by worker threads when the gateway runs several. */
  | { kind: 'memory'; maxBytes: number }
  /** Redis standalone or Redis Cluster (target.kind). `leaseKeys`: the size of the lease table (leasing.ts) in front of a remote store. */
  | { kind: 'redis'; target: RedisTarget; timeoutMs: number; leaseKeys: number }
  | {
      kind: 'postgres'
      target: PostgresTarget
      timeoutMs: number
      leaseKeys: number
      poolSize: number
      prefix: string
      unlogged: boolean | 'auto'
    }

/** The target FAIRVISOR_STORE names, parsed; `memory` is no target. */
export type StoreTarget = { kind: 'memory' } | { kind: 'redis'; target: RedisTarget } | { kind: 'postgres'; target: PostgresTarget }

export function parseStoreUrl(raw: string): StoreTarget {
  if (raw === 'memory') return { kind: 'memory' }
  // parse*Url throw a SettingError naming FAIRVISOR_STORE when malformed.
  if (/^(redis|rediss|redis\+cluster|unix):\/\/.+/.test(raw) || raw.startsWith('/')) return { kind: 'redis', target: parseRedisUrl(raw) }
  if (isPostgresUrl(raw)) return { kind: 'postgres', target: parsePostgresUrl(raw) }
  throw new SettingError(
    'FAIRVISOR_STORE',
    `"${raw}" is not a store; use memory, redis://host:port[/db], rediss://…, redis+cluster://h1:p1,h2:p2, unix:///path/to/redis.sock or postgres://user@host:5432/db`,
  )
}
