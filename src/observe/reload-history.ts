/**
 * The last bundle (re)loads, newest last, for `GET /v1/admin/bundle` (docs/admin.md): when, with
 * what result and which version. Kept where the bundle is read (runtime/config-source.ts: the one
 * thread, or the supervisor of worker threads); bounded.
 */
import type { ReloadEvent } from './reload-log.js'

export interface ReloadEntry {
  /** ISO 8601. */
  at: string
  /** `applied`, `unchanged`, `invalid`, `not_monotonic`, … (fairvisor_config_reload_total's result). */
  result: string
  /** The bundle version the load read, when it read one (a string, as the admin API shows versions). */
  version: string | null
}

/** Loads kept. */
export const RELOADS_KEPT = 20

export class ReloadHistory {
  private readonly entries: ReloadEntry[] = []

  /** `atMs`: epoch ms. */
  add(r: Pick<ReloadEvent, 'result' | 'version'>, atMs: number): void {
    this.entries.push({ at: new Date(atMs).toISOString(), result: r.result, version: r.version === undefined ? null : String(r.version) })
    if (this.entries.length > RELOADS_KEPT) this.entries.shift()
  }

  list(): ReloadEntry[] {
    return this.entries.map((e) => ({ ...e }))
  }
}
