/**
 * The limit kinds every store runs, by id: the one place that lists them.
 * The Redis script (store/redis/script.ts) and the PostgreSQL functions
 * (store/postgres/sql.ts) are assembled from this table when a store opens,
 * the lease table reads limits back through it, and the stores' differential
 * test draws limits of every kind in it. A kind is a folder beside this file
 * (kind.ts, redis.ts, postgres.ts) and one line below.
 */
import type { Limit, LimitKind } from '../algorithm.js'
import { CONCURRENCY_KIND } from './concurrency/kind.js'
import { METER_KIND } from './rate-meter/kind.js'
import { SLIDING_WINDOW_KIND } from './sliding-window/kind.js'
import { TOKEN_BUCKET_KIND } from './token-bucket/kind.js'
import { WINDOW_COUNTER_KIND } from './window-counter/kind.js'

const table = new Map<number, LimitKind>()
let revision = 0

/**
 * Adds a kind to the table (a second one of the same id replaces it).
 * Built-ins are registered below; a test registers a made-up one the same
 * way, before it opens the stores that run it.
 */
export function registerKind<L extends Limit, S>(kind: LimitKind<L, S>): void {
  table.set(kind.id, kind as unknown as LimitKind)
  revision++
}

registerKind(TOKEN_BUCKET_KIND)
registerKind(WINDOW_COUNTER_KIND)
registerKind(METER_KIND)
registerKind(CONCURRENCY_KIND)
registerKind(SLIDING_WINDOW_KIND)

/** The kinds by id. */
export const KINDS: ReadonlyMap<number, LimitKind> = table

/** Changes whenever the table does: the assembled scripts are rebuilt then. */
export function kindsRevision(): number {
  return revision
}
