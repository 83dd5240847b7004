/**
 * Watching a file the gateway reloads when it is replaced (the bundle, the
 * GeoIP databases, the Tor exit list, the ASN map): the parent directory is
 * watched (chokidar), so every way of replacing a file is seen — an in-place
 * write, write-then-rename, delete-and-recreate, a Kubernetes ConfigMap
 * `..data` swap — and events are debounced so a file written in several
 * chunks is read once it has stopped.
 */
import { statSync } from 'node:fs'
import { basename, dirname, resolve } from 'node:path'
import { watch, type FSWatcher } from 'chokidar'

export interface WatchOptions {
  /** Quiet time after the last file-system event before the file is read, in ms. Default 100. */
  debounceMs?: number
  /** Watcher failures (e.g. the directory vanished); the loaded bundle stays. */
  onError?(err: Error): void
  /** In directory mode, the file name endings that count. Default ['.json']. */
  extensions?: readonly string[]
}

export interface FileWatcher {
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

/** `reload` runs once the events on `path` have settled, and decides itself whether the new bytes are good. */
export function watchPath(path: string, reload: () => void, opts: WatchOptions = {}): FileWatcher {
  const debounceMs = opts.debounceMs ?? 100
  const target = resolve(path)
  // FAIRVISOR_CONFIG_FILE may name a directory holding the bundle (a ConfigMap mount point).
  const dirMode = isDirectory(target)
  const dir = dirMode ? target : dirname(target)
  const name = basename(target)
  const extensions = opts.extensions ?? ['.json']
  const relevant = (p: string): boolean => {
    const abs = resolve(p)
    if (abs === dir) return true
    if (dirname(abs) !== dir) return false
    const b = basename(abs)
    return b.startsWith('..') || (dirMode ? extensions.some((e) => b.endsWith(e)) : b === name)
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
