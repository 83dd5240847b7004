/**
 * The bundle and the RLS configuration read from their files and watched:
 * in a process of one thread by that thread (one-thread.ts), with worker
 * threads by the supervisor alone (workers/config-share.ts), which hands what
 * it applies to the workers. The watches are armed before the first read, so
 * a file replaced at any moment of start-up is seen.
 */
import { BundleSource, type ReloadReport } from '../bundle/source.js'
import type { CompiledBundle } from '../bundle/compile.js'
import { watchBundle } from '../bundle/watch.js'
import type { FileWatcher } from '../file-watch.js'
import type { RlsConfig } from '../grpc/rls-config.js'
import { RlsSource } from '../grpc/rls-source.js'
import type { Logger } from '../observe/logger.js'
import { ReloadHistory } from '../observe/reload-history.js'
import { bundleWatchLog } from '../observe/reload-log.js'
import type { Settings } from '../settings.js'
import type { BundleFeed } from './runtime.js'

export interface ConfigEvents {
  /** Each reload of the bundle, whatever its result. */
  reloaded(r: ReloadReport): void
  /** Each RLS configuration loaded. */
  rlsLoaded?(config: RlsConfig): void
  /** Each load of the RLS configuration, whatever its result. */
  rlsLoadResult?(loaded: boolean): void
}

export class ConfigSource implements BundleFeed {
  readonly bundles: BundleSource
  readonly rlsSource: RlsSource | undefined
  /** The last loads, whatever their result (the admin API's bundle view). */
  readonly history = new ReloadHistory()
  private readonly watcher: FileWatcher

  constructor(
    private readonly settings: Pick<Settings, 'configFile' | 'bundleSigningKey' | 'mode' | 'rlsConfig' | 'rlsMergeDomainConfig'>,
    private readonly log: Logger,
    clock: () => number,
    on: ConfigEvents,
  ) {
    this.bundles = new BundleSource(settings.configFile, clock, { signingKey: settings.bundleSigningKey, mode: settings.mode })
    this.bundles.onReload((r) => {
      this.history.add(r, clock())
      on.reloaded(r)
    })
    this.rlsSource =
      settings.rlsConfig === undefined
        ? undefined
        : new RlsSource(settings.rlsConfig, log, on.rlsLoaded, settings.rlsMergeDomainConfig, on.rlsLoadResult)
    // Hot reload on every way the file can be replaced (see bundle/watch.ts).
    this.watcher = watchBundle(this.bundles, bundleWatchLog(log, settings.configFile))
  }

  bundle(): CompiledBundle | null {
    return this.bundles.current
  }

  rls(): RlsConfig | undefined {
    return this.rlsSource?.current
  }

  /** Arm the watches, then read the bundle and the RLS configuration. */
  async start(): Promise<void> {
    await Promise.all([this.watcher.ready, this.rlsSource?.watch()])
    if (this.settings.configFile === undefined)
      this.log.warn('FAIRVISOR_CONFIG_FILE is not set: every request is answered 503 no_bundle_loaded')
    else this.bundles.reload()
    this.rlsSource?.reload()
  }

  /** SIGHUP: reload both now, and set the bundle's watch up anew (its directory may be another one now). */
  readonly onHup = (): void => {
    this.bundles.reload()
    void this.watcher.rearm()
    this.rlsSource?.reload()
  }

  close(): Promise<unknown> {
    return Promise.all([this.watcher.close(), this.rlsSource?.close()])
  }
}
