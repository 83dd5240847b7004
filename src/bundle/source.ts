/**
 * The current bundle: one immutable snapshot that requests read once each.
 * A new bundle is built aside and swapped in whole; a bad or stale one
 * changes nothing (the last good bundle stays) and the reason is reported.
 *
 * A reload never lowers protection silently: once a bundle is loaded, a new
 * one in which any policy fails validation is refused whole (`invalid`), and
 * its version is not consumed, so the fixed file can carry the same version.
 * Only at start-up, when there is nothing to keep, do the valid policies of
 * such a bundle load without the bad ones; each dropped policy is an error.
 *
 * The bytes of the bundle in force are kept (`accepted`) so that worker
 * threads build the very same bundle from them (`buildAccepted`) without
 * reading the file, which may hold something else by then.
 */
import { readFileSync } from 'node:fs'
import type { CompiledBundle } from './compile.js'
import type { BundleIssue } from './types.js'
import { bundleHash, loadBundleBytes, loadBundleFile, resolveBundleFile, type LoadOptions, type LoadResult } from './load.js'

/** `unchanged`: the file holds the bytes already in force (a SIGHUP with nothing new): not a failure. */
export type ReloadResult = 'applied' | 'invalid' | 'not_monotonic' | 'unchanged'

export interface ReloadReport {
  result: ReloadResult
  file: string
  version?: number
  /** Log at error. An `applied` report has errors only at start-up: the policies it loaded without. */
  errors: string[]
  warnings: string[]
}

export type BundleSourceOptions = LoadOptions

/**
 * A bundle as applied: its exact bytes, where they were read and when (validation's `now`), and
 * what validation found in them. Cheap to post to a worker.
 */
export interface AcceptedBundle {
  bytes: Uint8Array
  file: string
  now: number
  /** Validation's findings (warnings, dropped policies): a worker builds the bundle without validating it again. */
  issues: readonly BundleIssue[]
}

/**
 * The bundle `a` describes, built again in this thread: the same bytes,
 * options and `now` give the same bundle (validation and compilation are
 * pure), so a worker runs exactly what its supervisor accepted. Validation is
 * the supervisor's: its findings come with the bytes, so a worker thread never
 * loads the JSON Schema validator. Throws if it does not load, which only a
 * different signing key could cause.
 */
export function buildAccepted(a: AcceptedBundle, opts: BundleSourceOptions = {}): CompiledBundle {
  const r = loadBundleBytes(Buffer.from(a.bytes.buffer, a.bytes.byteOffset, a.bytes.byteLength), a.file, a.now, opts, a.issues)
  if (!r.ok) throw new Error(`the accepted bundle did not load again: ${r.errors.join('; ')}`)
  return r.bundle
}

export class BundleSource {
  private bundle: CompiledBundle | null = null
  private acceptedNow: AcceptedBundle | undefined
  private readonly listeners: ((r: ReloadReport) => void)[] = []
  /** Hash of the bytes last tried (applied or not), so the watcher skips events that changed nothing. */
  private lastTried: string | undefined

  constructor(
    readonly path: string | undefined,
    private readonly clock: () => number,
    private readonly opts: BundleSourceOptions = {},
  ) {}

  get current(): CompiledBundle | null {
    return this.bundle
  }

  /** The bytes of the bundle in force (undefined while none is). */
  get accepted(): AcceptedBundle | undefined {
    return this.acceptedNow
  }

  onReload(fn: (r: ReloadReport) => void): void {
    this.listeners.push(fn)
  }

  /** Load the file again and apply it when valid and strictly newer. */
  reload(): ReloadReport {
    if (this.path === undefined) return { result: 'invalid', file: '', errors: ['FAIRVISOR_CONFIG_FILE is not set'], warnings: [] }
    return this.load(false)!
  }

  /**
   * The watcher's reload: only when the file's bytes differ from the last ones
   * tried. Events on unrelated names, a rewrite with the same bytes, or a
   * file that is momentarily missing (delete-and-recreate) change nothing and
   * report nothing; the next event brings the new file.
   */
  reloadIfChanged(): ReloadReport | undefined {
    if (this.path === undefined) return undefined
    return this.load(true)
  }

  private load(onlyIfChanged: boolean): ReloadReport | undefined {
    const path = this.path!
    let file: string
    let bytes: Buffer
    try {
      file = resolveBundleFile(path)
      bytes = readFileSync(file)
    } catch {
      return onlyIfChanged ? undefined : this.emit(this.apply(loadBundleFile(path, this.clock(), this.opts)))
    }
    const hash = bundleHash(bytes)
    if (onlyIfChanged && hash === this.lastTried) return undefined
    this.lastTried = hash
    // The bytes in force, read again (SIGHUP): nothing to apply and nothing wrong.
    if (this.bundle?.hash === hash) return this.emit({ result: 'unchanged', file, version: this.bundle.version, errors: [], warnings: [] })
    const now = this.clock()
    const loaded = loadBundleBytes(bytes, file, now, this.opts)
    const report = this.apply(loaded)
    if (report.result === 'applied' && loaded.ok) this.acceptedNow = { bytes, file, now, issues: loaded.issues }
    return this.emit(report)
  }

  private emit(report: ReloadReport): ReloadReport {
    for (const fn of this.listeners) fn(report)
    return report
  }

  private apply(r: LoadResult): ReloadReport {
    if (!r.ok) return { result: 'invalid', file: r.file, errors: r.errors, warnings: [] }
    const cur = this.bundle
    if (cur !== null && r.dropped.length > 0) {
      const n = r.dropped.length
      return {
        result: 'invalid',
        file: r.file,
        version: r.bundle.version,
        errors: [
          ...r.dropped,
          `${r.file}: bundle_version ${r.bundle.version} refused whole: ${n} error${n === 1 ? '' : 's'} in its policies; the loaded bundle_version ${cur.version} stays`,
        ],
        warnings: r.warnings,
      }
    }
    if (cur !== null && !(r.bundle.version > cur.version)) {
      return {
        result: 'not_monotonic',
        file: r.file,
        version: r.bundle.version,
        errors: [`${r.file}: /bundle_version: version_not_monotonic: ${r.bundle.version} is not greater than the loaded ${cur.version}`],
        warnings: r.warnings,
      }
    }
    this.bundle = r.bundle
    return { result: 'applied', file: r.file, version: r.bundle.version, errors: r.dropped, warnings: r.warnings }
  }
}
