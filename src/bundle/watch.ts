/**
 * Hot reload: watch the bundle file and reload it through BundleSource
 * (which builds the new bundle aside, applies only a strictly greater
 * version and keeps the last good one).
 *
 * The parent directory is watched, not the file's inode, because most ways
 * of replacing a file give it a new inode: write-then-rename (editors,
 * `mv`), delete-and-recreate, and the Kubernetes ConfigMap swap, where
 * `bundle.json` is a symlink to `..data/bundle.json` and `..data` is a
 * symlink atomically re-pointed at a new timestamped directory. Any event on
 * the file's name or on a `..`-name therefore schedules a re-read.
 *
 * Events are debounced (default 100 ms after the last one) so a write in
 * several chunks is read once it has stopped; chokidar's awaitWriteFinish is
 * not used because it polls for ~2 s. A file read half-written is just an
 * `invalid` reload (the old bundle stays) and the write's next event reads
 * it again. Bytes identical to the last ones tried are not reloaded.
 */
import { statSync } from 'node:fs'
import { basename, dirname, resolve } from 'node:path'
import { watch, type FSWatcher } from 'chokidar'
import type { BundleSource } from './source.js'

export interface WatchOptions {
  /** Quiet time after the last file-system event before the file is read, in ms. Default 100. */
  debounceMs?: number
  /** Watcher failures (e.g. the directory vanished); the loaded bundle stays. */
  onError?(err: Error): void
}

export interface BundleWatcher {
  /** Resolves once the initial scan is done and changes are being seen. */
  ready: Promise<void>
  close(): Promise<void>
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory()
  } catch {
    return false
  }
}

export function watchBundle(source: BundleSource, opts: WatchOptions = {}): BundleWatcher {
  if (source.path === undefined) return { ready: Promise.resolve(), close: async () => {} }
  return watchPath(source.path, () => source.reloadIfChanged(), opts)
}

/**
 * The same watch for any file the gateway reloads when it is replaced (the
 * GeoIP databases, the Tor exit list, the ASN map): `reload` runs once the
 * events on `path` have settled, and decides itself whether the new bytes are good.
 */
export function watchPath(path: string, reload: () => void, opts: WatchOptions = {}): BundleWatcher {
  const debounceMs = opts.debounceMs ?? 100
  const target = resolve(path)
  // FAIRVISOR_CONFIG_FILE may name a directory holding the bundle (a ConfigMap mount point).
  const dirMode = isDirectory(target)
  const dir = dirMode ? target : dirname(target)
  const name = basename(target)
  const relevant = (p: string): boolean => {
    const abs = resolve(p)
    if (abs === dir) return true
    if (dirname(abs) !== dir) return false
    const b = basename(abs)
    return b.startsWith('..') || (dirMode ? b.endsWith('.json') : b === name)
  }

  let timer: NodeJS.Timeout | undefined
  let closed = false
  const fire = (): void => {
    timer = undefined
    if (!closed) reload()
  }
  const schedule = (): void => {
    if (timer) clearTimeout(timer)
    timer = setTimeout(fire, debounceMs)
  }

  const watcher: FSWatcher = watch(dir, {
    depth: 0,
    ignoreInitial: true,
    persistent: true,
    ignored: (p: string) => !relevant(p),
  })
  watcher.on('all', (_event, p) => {
    if (relevant(p)) schedule()
  })
  watcher.on('error', (err) => opts.onError?.(err as Error))
  const ready = new Promise<void>((r) => watcher.once('ready', () => r()))

  return {
    ready,
    async close() {
      closed = true
      if (timer) clearTimeout(timer)
      await watcher.close()
    },
  }
}
