/**
 * The RLS configuration in force (FAIRVISOR_RLS_CONFIG), reloaded when its
 * file or directory changes and on SIGHUP; a configuration that does not load
 * is logged and the last good one stays. With worker threads only the
 * supervisor has one: it hands each configuration it loads to the workers
 * (`onLoaded`), which never read the file.
 */
import { watchPath, type FileWatcher } from '../file-watch.js'
import type { Logger } from '../observe/logger.js'
import { loadRlsConfig, type RlsConfig } from './rls-config.js'

export class RlsSource {
  /** undefined until a configuration loads: a bad one at start leaves none (calls answered an error), not an empty one. */
  current: RlsConfig | undefined = undefined
  private watcher: FileWatcher | undefined

  constructor(
    private readonly path: string,
    private readonly log: Logger,
    private readonly onLoaded: (config: RlsConfig) => void = () => {},
    /** MERGE_DOMAIN_CONFIG: one domain may be split over several files. */
    private readonly mergeDomains = false,
    /** Each load, whatever its result (config_load_success / config_load_error). */
    private readonly onResult: (loaded: boolean) => void = () => {},
  ) {}

  /** True when the configuration loaded (and replaced the one in force). */
  reload(): boolean {
    try {
      const loaded = loadRlsConfig(this.path, this.mergeDomains)
      this.current = loaded
      this.log.info({ file: this.path, domains: [...loaded.keys()] }, 'rls config loaded')
      this.onLoaded(loaded)
      this.onResult(true)
      return true
    } catch (err) {
      this.log.error({ file: this.path, err: { message: (err as Error).message } }, 'rls config rejected; the last good one stays')
      this.onResult(false)
      return false
    }
  }

  watch(): Promise<void> {
    this.watcher = watchPath(this.path, () => void this.reload(), {
      extensions: ['.yaml', '.yml'],
      onError: (err) =>
        this.log.error({ err: { message: err.message }, file: this.path }, 'rls config watcher failed; the loaded configuration stays'),
    })
    return this.watcher.ready
  }

  close(): Promise<void> {
    return this.watcher?.close() ?? Promise.resolve()
  }
}
