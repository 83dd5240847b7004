/**
 * Watching a file the gateway reloads when it is replaced (the bundle, the
 * GeoIP databases, the Tor exit list, the ASN map): the parent directory is
 * watched, so every way of replacing a file is seen — an in-place write,
 * write-then-rename, delete-and-recreate, a Kubernetes ConfigMap `..data`
 * swap — and events are debounced so a file written in several chunks is
 * read once it has stopped.
 *
 * The watches are Node's fs.watch (inotify on Linux), which names the entry
 * of each event, so nothing else in a directory is looked at. chokidar, used
 * before, re-read the directory and stat-ed its entries on every event in it:
 * with the bundle in a busy directory (a shared /tmp, /etc) that was thousands
 * of stats a second on the gateway (100 writes to an unrelated file beside 135
 * others: 6,260 stats; now none).
 *
 * A watch on a directory dies with it: once the directory is removed, a new
 * directory of the same name is another inode nobody watches. So the
 * directory's own parent is watched as well, for that one name, and the
 * directory's identity is checked once a second: when the directory goes the
 * owner is told (`onDirectory('gone')`), and when it is back the directory
 * watch is armed anew, the owner told (`'back'`) and the file re-read.
 * `rearm()` does the same on demand (SIGHUP).
 */
import { statSync, watch as watchEntries, type FSWatcher } from 'node:fs'
import { basename, dirname, resolve } from 'node:path'

export interface WatchOptions {
  /** Quiet time after the last file-system event before the file is read, in ms. Default 100. */
  debounceMs?: number
  /** Watcher failures; the loaded bundle stays. */
  onError?(err: Error): void
  /** In directory mode, the file name endings that count. Default ['.json']. */
  extensions?: readonly string[]
  /** The watched directory was removed (`gone`), or is there again and watched anew (`back`). */
  onDirectory?(state: 'gone' | 'back', dir: string): void
}

export interface FileWatcher {
  /** Resolves once the initial scan is done and changes are being seen. */
  ready: Promise<void>
  /** Drops the directory watch and sets up a new one (the directory may be another inode now), then re-reads. */
  rearm(): Promise<void>
  close(): Promise<void>
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory()
  } catch {
    return false
  }
}

/**
 * Which directory `path` is now: its inode and birth time. A directory removed and made again at
 * once can get the freed inode number back, so the number alone may not tell them apart.
 */
function identityOf(path: string): string | undefined {
  try {
    const st = statSync(path)
    return st.isDirectory() ? `${st.ino}:${st.birthtimeMs}` : undefined
  } catch {
    return undefined
  }
}

/** How often the directory's identity is checked besides the events (a swap can come with none at all). */
const IDENTITY_POLL_MS = 1000

/**
 * fs.watch on a directory's entries, calling `onEntry` with the entry's name (null when the
 * platform gives none). Undefined when the directory is missing: the identity poll arms it
 * once the directory exists.
 */
function watchDirectory(path: string, onEntry: (entry: string | null) => void, onError?: (err: Error) => void): FSWatcher | undefined {
  try {
    const w = watchEntries(path, { persistent: false }, (_event, entry) => onEntry(entry))
    w.on('error', (err) => onError?.(err))
    return w
  } catch (err) {
    if ((err as { code?: string }).code !== 'ENOENT') onError?.(err as Error)
    return undefined
  }
}

/** `reload` runs once the events on `path` have settled, and decides itself whether the new bytes are good. */
export function watchPath(path: string, reload: () => void, opts: WatchOptions = {}): FileWatcher {
  const debounceMs = opts.debounceMs ?? 100
  const target = resolve(path)
  // FAIRVISOR_CONFIG_FILE may name a directory holding the bundle (a ConfigMap mount point).
  const dirMode = isDirectory(target)
  const dir = dirMode ? target : dirname(target)
  const parent = dirname(dir)
  const name = basename(target)
  const extensions = opts.extensions ?? ['.json']
  const dirName = basename(dir)
  /** An entry of `dir` that can change what is read (and `dir`'s own name: an event on the directory itself). */
  const relevant = (entry: string | null): boolean =>
    entry === null || entry === dirName || entry.startsWith('..') || (dirMode ? extensions.some((e) => entry.endsWith(e)) : entry === name)

  let timer: NodeJS.Timeout | undefined
  let closed = false
  const fire = (): void => {
    timer = undefined
    if (closed) return
    // A write seen through the old watch while the directory is a new one: re-arm first (it reads again once armed).
    if (identityOf(dir) !== inode) return directoryChanged()
    reload()
  }
  const schedule = (): void => {
    if (timer) clearTimeout(timer)
    timer = setTimeout(fire, debounceMs)
  }

  const watchDir = (): FSWatcher | undefined => watchDirectory(dir, (entry) => relevant(entry) && schedule(), opts.onError)
  let inner = watchDir()
  // Re-arms run one after another, each on the directory as it is when it runs.
  let rearming: Promise<void> = Promise.resolve()
  const rearm = (): Promise<void> =>
    (rearming = rearming.then(() => {
      if (closed) return
      inner?.close()
      inner = watchDir()
      schedule() // whatever was written while nothing watched is read now
    }))

  // The directory's parent, for the directory's own name only (not what else the parent holds):
  // any event on the name, even a quick remove-and-recreate that leaves a directory there whenever
  // one looks, and the directory's identity (inode, birth time) tells a new directory from the old one.
  let inode = identityOf(dir)
  let settle: NodeJS.Timeout | undefined
  function directoryChanged(): void {
    settle = undefined
    if (closed) return
    const now = identityOf(dir)
    if (now === inode) return
    if (inode !== undefined) opts.onDirectory?.('gone', dir)
    inode = now
    if (now !== undefined)
      rearm().then(
        () => !closed && opts.onDirectory?.('back', dir),
        (err: Error) => opts.onError?.(err),
      )
  }
  const poll = setInterval(() => identityOf(dir) !== inode && directoryChanged(), IDENTITY_POLL_MS)
  poll.unref()
  const onName = (): void => {
    if (settle) clearTimeout(settle)
    settle = setTimeout(directoryChanged, debounceMs)
  }
  const outer =
    parent === dir ? undefined : watchDirectory(parent, (entry) => (entry === null || entry === dirName) && onName(), opts.onError)

  return {
    ready: Promise.resolve(),
    rearm,
    async close() {
      closed = true
      clearInterval(poll)
      if (timer) clearTimeout(timer)
      if (settle) clearTimeout(settle)
      await rearming
      outer?.close()
      inner?.close()
    },
  }
}
