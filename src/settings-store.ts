/** The store's settings (FAIRVISOR_STORE and the sizes, deadline and PostgreSQL options that go with it), parsed as settings.ts parses the rest. */
import { SettingError } from './errors.js'
import { boolOrAuto, integer, optional, size, type Env } from './settings-env.js'
import { PREFIX_RE } from './store/postgres/sql.js'
import { parseStoreUrl, type StoreConfig, type StoreTarget } from './store/config.js'
import { DEFAULT_CELLS, MAX_CELLS, MIN_CELLS } from './store/threads/leases.js'

export interface StoreSettings {
  /** `memory`, a redis:// / rediss:// / redis+cluster:// / unix socket URL, or a postgres:// / postgresql:// URL. */
  store: string
  /** The same, parsed once, with the settings of that store: what the store factory builds from. */
  storeConfig: StoreConfig
  /** Memory-store bound in bytes (FAIRVISOR_SHARED_DICT_SIZE, e.g. 128m). */
  sharedDictBytes: number
  /** Keys the process's lease table holds at once (FAIRVISOR_LEASE_TABLE_KEYS; remote stores only). Default 8192. */
  leaseTableKeys: number
  /** Deadline of each store call in ms: FAIRVISOR_STORE_TIMEOUT_MS, else FAIRVISOR_REDIS_TIMEOUT_MS (its older name), default 50 (PostgreSQL: 500). */
  storeTimeoutMs: number
  /** PostgreSQL store: connections, table/function name prefix, UNLOGGED table (`auto`: except on YugabyteDB). */
  pgPoolSize: number
  pgTablePrefix: string
  pgUnlogged: boolean | 'auto'
}

/**
 * The store deadline: the new name wins when both are set. Unset, 50 ms for
 * Redis and 500 ms for PostgreSQL, whose batched statement under a hot key
 * takes row locks and needs several times Redis' time (README, PostgreSQL).
 */
function storeTimeout(env: Env, store: StoreTarget): number {
  const dflt = store.kind === 'postgres' ? 500 : 50
  const older = integer(env, 'FAIRVISOR_REDIS_TIMEOUT_MS', dflt, 1, 60_000)
  return integer(env, 'FAIRVISOR_STORE_TIMEOUT_MS', older, 1, 60_000)
}

function tablePrefix(env: Env): string {
  const raw = optional(env, 'FAIRVISOR_PG_TABLE_PREFIX') ?? 'fairvisor_'
  if (!PREFIX_RE.test(raw))
    throw new SettingError(
      'FAIRVISOR_PG_TABLE_PREFIX',
      `"${raw}" is not allowed; use lower-case letters, digits and _ (at most 41, not starting with a digit)`,
    )
  return raw
}

/** The store config: the parsed target with the settings of that store. */
function storeConfig(target: StoreTarget, s: Omit<StoreSettings, 'store' | 'storeConfig'>): StoreConfig {
  if (target.kind === 'memory') return { kind: 'memory', maxBytes: s.sharedDictBytes }
  const common = { timeoutMs: s.storeTimeoutMs, leaseKeys: s.leaseTableKeys }
  if (target.kind === 'redis') return { kind: 'redis', target: target.target, ...common }
  return { kind: 'postgres', target: target.target, ...common, poolSize: s.pgPoolSize, prefix: s.pgTablePrefix, unlogged: s.pgUnlogged }
}

export function storeSettings(env: Env): StoreSettings {
  const store = optional(env, 'FAIRVISOR_STORE') ?? 'memory'
  const target = parseStoreUrl(store)
  const sizes = {
    sharedDictBytes: size(env, 'FAIRVISOR_SHARED_DICT_SIZE', '128m'),
    storeTimeoutMs: storeTimeout(env, target),
    leaseTableKeys: integer(env, 'FAIRVISOR_LEASE_TABLE_KEYS', DEFAULT_CELLS, MIN_CELLS, MAX_CELLS),
    pgPoolSize: integer(env, 'FAIRVISOR_PG_POOL_SIZE', 4, 1, 64),
    pgTablePrefix: tablePrefix(env),
    pgUnlogged: boolOrAuto(env, 'FAIRVISOR_PG_UNLOGGED'),
  }
  return { store, storeConfig: storeConfig(target, sizes), ...sizes }
}
