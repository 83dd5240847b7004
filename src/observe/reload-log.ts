/** Each bundle (re)load, as log lines and the reload counter; an applied bundle also updates fairvisor_config_info. */
import type { WatchOptions } from '../file-watch.js'
import type { Logger } from './logger.js'
import type { Metrics } from './metrics.js'

/** Structural, so observe/ needs nothing from bundle/. */
export interface ReloadEvent {
  result: string
  file: string | undefined
  version?: number
  warnings: readonly string[]
  errors: readonly string[]
}

/** fairvisor_config_info: the bundle in force. */
export function showConfig(metrics: Metrics, applied: { version: number; hash: string }): void {
  metrics.configInfo.reset()
  metrics.configInfo.set({ version: String(applied.version), hash: applied.hash }, 1)
}

export function logReload(
  log: Logger,
  metrics: Metrics,
  r: ReloadEvent,
  applied: { version: number; hash: string; policies: readonly unknown[] } | null,
): void {
  metrics.reloads.inc({ result: r.result })
  // A reload of the bytes in force (a SIGHUP with nothing new, a config-reloader's periodic signal) is not a failure.
  if (r.result === 'unchanged') return log.info({ file: r.file, version: r.version, result: r.result }, 'bundle unchanged')
  for (const w of r.warnings) log.warn({ file: r.file }, w)
  // Errors of an applied bundle are the policies dropped at start-up: logged at error too.
  for (const e of r.errors) log.error({ file: r.file, result: r.result }, e)
  if (r.result !== 'applied' || applied === null) return
  showConfig(metrics, applied)
  log.info({ file: r.file, version: applied.version, hash: applied.hash, policies: applied.policies.length }, 'bundle applied')
}

/** What the bundle's watch itself reports: its failures, and its directory going away and coming back. */
export function bundleWatchLog(log: Logger, file: string | undefined): WatchOptions {
  return {
    onError: (err) => log.error({ err: { message: err.message }, file }, 'bundle watcher failed; the loaded bundle stays'),
    onDirectory: (state, dir) =>
      state === 'gone'
        ? log.warn({ dir, file }, 'bundle directory removed; the loaded bundle stays, and the directory is watched for its return')
        : log.info({ dir, file }, 'bundle directory (re)created; watching it again'),
  }
}
