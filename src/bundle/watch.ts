/**
 * Hot reload: watch the bundle file and reload it through BundleSource
 * (which builds the new bundle aside, applies only a strictly greater
 * version and keeps the last good one).
 *
 * How files are watched is file-watch.ts's (shared with the data files of
 * the ip: descriptors). The parent directory is watched, not the file's inode, because most ways
 * of replacing a file give it a new inode: write-then-rename (editors,
 * `mv`), delete-and-recreate, and the Kubernetes ConfigMap swap, where
 * `bundle.json` is a symlink to `..data/bundle.json` and `..data` is a
 * symlink atomically re-pointed at a new timestamped directory. Any event on
 * the file's name or on a `..`-name therefore schedules a re-read.
 *
 * Events are debounced (default 100 ms after the last one) so a write in
 * several chunks is read once it has stopped (no polling for the write's end:
 * that would delay every reload). A file read half-written is just an
 * `invalid` reload (the old bundle stays) and the write's next event reads
 * it again. Bytes identical to the last ones tried are not reloaded.
 *
 * The directory itself may be removed and recreated (a deploy that replaces
 * the whole directory): file-watch.ts then watches the new directory and
 * re-reads the bundle, and the owner logs both moments.
 */
import { watchPath, type FileWatcher, type WatchOptions } from '../file-watch.js'
import type { BundleSource } from './source.js'

export function watchBundle(source: BundleSource, opts: WatchOptions = {}): FileWatcher {
  if (source.path === undefined) return { ready: Promise.resolve(), rearm: async () => {}, close: async () => {} }
  return watchPath(source.path, () => source.reloadIfChanged(), opts)
}
