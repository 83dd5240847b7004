/**
 * The current bundle: one immutable snapshot that requests read once each.
 * A new bundle is built aside and swapped in whole; a bad or stale one
 * changes nothing (the last good bundle stays) and the reason is reported.
 */
import type { CompiledBundle } from './compile.js'
import { loadBundleFile, type LoadResult } from './load.js'

export type ReloadResult = 'applied' | 'invalid' | 'not_monotonic'

export interface ReloadReport {
  result: ReloadResult
  file: string
  version?: number
  errors: string[]
  warnings: string[]
}

export class BundleSource {
  private bundle: CompiledBundle | null = null
  private readonly listeners: ((r: ReloadReport) => void)[] = []

  constructor(
    readonly path: string | undefined,
    private readonly clock: () => number,
  ) {}

  get current(): CompiledBundle | null {
    return this.bundle
  }

  onReload(fn: (r: ReloadReport) => void): void {
    this.listeners.push(fn)
  }

  /** Load the file again and apply it when valid and strictly newer. */
  reload(): ReloadReport {
    if (this.path === undefined) return { result: 'invalid', file: '', errors: ['FAIRVISOR_CONFIG_FILE is not set'], warnings: [] }
    const report = this.apply(loadBundleFile(this.path, this.clock()))
    for (const fn of this.listeners) fn(report)
    return report
  }

  private apply(r: LoadResult): ReloadReport {
    if (!r.ok) return { result: 'invalid', file: r.file, errors: r.errors, warnings: [] }
    const warnings = [...r.dropped, ...r.warnings]
    const cur = this.bundle
    if (cur !== null && !(r.bundle.version > cur.version)) {
      return {
        result: 'not_monotonic',
        file: r.file,
        version: r.bundle.version,
        errors: [`${r.file}: /bundle_version: version_not_monotonic: ${r.bundle.version} is not greater than the loaded ${cur.version}`],
        warnings,
      }
    }
    this.bundle = r.bundle
    return { result: 'applied', file: r.file, version: r.bundle.version, errors: [], warnings }
  }
}
