/**
 * The operator's data files behind the `ip:` descriptors, held in one object
 * so RequestView and the wiring take a single argument: the ASN → type map
 * (FAIRVISOR_ASN_MAP_FILE), the GeoIP country and ASN databases
 * (FAIRVISOR_GEOIP_COUNTRY_FILE, FAIRVISOR_GEOIP_ASN_FILE) and the Tor exit
 * list (FAIRVISOR_TOR_EXIT_LIST_FILE).
 *
 * Every file is optional. At start-up a missing, unreadable or malformed one
 * throws a SettingError naming its variable (the CLI exits 2). Afterwards
 * each file is watched like the bundle (file-watch.ts: parent directory,
 * debounced, any way of replacing it) and re-read when it changes; the new
 * contents are parsed aside and swapped in whole, and a bad file is logged
 * at error while the last good contents stay in use.
 *
 * With worker threads the supervisor alone reads, checks and watches the
 * files (one NetworkData of its own); each file's bytes sit in a
 * SharedArrayBuffer, handed to every worker at start and again after each
 * change (workers/network-share.ts). A GeoIP database is then in memory once
 * per process: each worker's maxmind Reader reads the shared bytes through a
 * Buffer view (only its small decoded-record cache is per worker). The ASN
 * map and the Tor exit list are a JS Map and Set, which threads cannot share:
 * each worker parses the shared text into its own.
 */
import { readFileSync } from 'node:fs'
import { watchPath, type FileWatcher } from '../file-watch.js'
import { SettingError } from '../errors.js'
import { normaliseAsn, parseAsnMap } from './asn-map.js'
import { GeoDatabase } from './geoip.js'
import { isTorExit, parseTorExits } from './tor-exits.js'

/** The operator's data files behind the ip: descriptors (all optional, all reloaded when replaced): settings, read by settings.ts. */
export interface NetworkFiles {
  /** ASN → network type map (FAIRVISOR_ASN_MAP_FILE) for ip:type. */
  asnMapFile: string | undefined
  /** MaxMind-format country (or city) database for ip:country when X-Country-Code is absent. */
  geoipCountryFile: string | undefined
  /** MaxMind-format ASN database for ip:asn (and ip:type) when X-ASN is absent. */
  geoipAsnFile: string | undefined
  /** Tor exit addresses, one per line, for ip:tor when X-Tor-Exit is absent. */
  torExitListFile: string | undefined
}

/** The two pino methods used here, so tests can pass a recorder. */
export interface DataLog {
  info(fields: object, msg: string): void
  warn?(fields: object, msg: string): void
  error(fields: object, msg: string): void
}

/** Each configured file's current bytes by setting name, in shared memory (what a worker thread is handed). */
export type SharedNetworkBytes = Record<string, SharedArrayBuffer>

/**
 * What a worker thread's NetworkData gets from its supervisor instead of the files
 * (the supervisor's side is workers/network-share.ts).
 */
export interface NetworkFeed {
  bytes: SharedNetworkBytes
  /** Calls `fn` with a file's new bytes each time the supervisor has applied a change. */
  subscribe(fn: (setting: string, bytes: SharedArrayBuffer) => void): void
}

/** `bytes` copied into shared memory, as a Buffer over it. */
function shared(bytes: Buffer): Buffer {
  const out = Buffer.from(new SharedArrayBuffer(bytes.length))
  bytes.copy(out)
  return out
}

/** One watched file and the last good value parsed from it. */
class DataFile<T> {
  value: T
  /** Over a SharedArrayBuffer. */
  bytes: Buffer

  constructor(
    readonly setting: string,
    readonly file: string,
    private readonly parse: (bytes: Buffer, file: string) => T,
    given?: SharedArrayBuffer,
  ) {
    let bytes: Buffer
    try {
      bytes = given ? Buffer.from(given) : shared(readFileSync(file))
    } catch (err) {
      throw new SettingError(setting, `cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`)
    }
    try {
      this.value = parse(bytes, file)
    } catch (err) {
      if (err instanceof SettingError) throw err
      throw new SettingError(setting, `${file}: ${(err as Error).message}`)
    }
    this.bytes = bytes
  }

  /** Re-read after a change; identical bytes (a touch, a second event) are not parsed again. True when new contents were applied. */
  reload(log: DataLog): boolean {
    let bytes: Buffer
    try {
      bytes = readFileSync(this.file)
    } catch (err) {
      // Between the unlink and the rename of a replacement: the next event reads the new file.
      log.error(
        { setting: this.setting, file: this.file, err: { message: (err as Error).message } },
        'data file unreadable; the last good one stays',
      )
      return false
    }
    if (bytes.equals(this.bytes)) return false
    return this.apply(shared(bytes), log, 'data file reloaded')
  }

  /** Parse `bytes` (shared) and swap them in; a bad file is logged and the last good one stays. */
  apply(bytes: Buffer, log: DataLog, msg: string): boolean {
    try {
      this.value = this.parse(bytes, this.file)
      this.bytes = bytes
      log.info({ setting: this.setting, file: this.file, bytes: bytes.length }, msg)
      return true
    } catch (err) {
      log.error(
        { setting: this.setting, file: this.file, err: { message: (err as Error).message } },
        'data file rejected; the last good one stays',
      )
      return false
    }
  }
}

const asnMap = (bytes: Buffer, file: string): Map<string, string> => parseAsnMap(bytes.toString('utf8'), file)
const geo = (bytes: Buffer): GeoDatabase => new GeoDatabase(bytes)
const tor = (bytes: Buffer, file: string): Set<string> => parseTorExits(bytes.toString('utf8'), file)

export class NetworkData {
  private readonly asnTypes: DataFile<Map<string, string>> | undefined
  private readonly countryDb: DataFile<GeoDatabase> | undefined
  private readonly asnDb: DataFile<GeoDatabase> | undefined
  private readonly torExits: DataFile<Set<string>> | undefined
  private watchers: FileWatcher[] = []
  private readonly changed: ((setting: string, bytes: SharedArrayBuffer) => void)[] = []

  /**
   * Reads every configured file now; throws a SettingError naming the first bad one.
   * `feed`: a worker thread's, whose supervisor has read the files (their bytes) and watches them.
   */
  constructor(
    files: NetworkFiles,
    private readonly feed?: NetworkFeed,
  ) {
    const open = <T>(setting: string, file: string | undefined, parse: (b: Buffer, f: string) => T) =>
      file === undefined ? undefined : new DataFile(setting, file, parse, feed?.bytes[setting])
    this.asnTypes = open('FAIRVISOR_ASN_MAP_FILE', files.asnMapFile, asnMap)
    this.countryDb = open('FAIRVISOR_GEOIP_COUNTRY_FILE', files.geoipCountryFile, geo)
    this.asnDb = open('FAIRVISOR_GEOIP_ASN_FILE', files.geoipAsnFile, geo)
    this.torExits = open('FAIRVISOR_TOR_EXIT_LIST_FILE', files.torExitListFile, tor)
  }

  /** No files at all: every lookup answers undefined (the ip: descriptors then rely on headers alone). */
  static readonly none = new NetworkData({
    asnMapFile: undefined,
    geoipCountryFile: undefined,
    geoipAsnFile: undefined,
    torExitListFile: undefined,
  })

  /** Network type of an ASN (`13335` or `AS13335`) from the ASN map. */
  asnType(asn: string): string | undefined {
    return this.asnTypes?.value.get(normaliseAsn(asn))
  }

  country(ip: string): string | undefined {
    return this.countryDb?.value.country(ip)
  }

  asn(ip: string): string | undefined {
    return this.asnDb?.value.asn(ip)
  }

  /** undefined when no exit list is configured. */
  torExit(ip: string): boolean | undefined {
    return this.torExits === undefined ? undefined : isTorExit(this.torExits.value, ip)
  }

  private get files(): DataFile<unknown>[] {
    return [this.asnTypes, this.countryDb, this.asnDb, this.torExits].filter((f) => f !== undefined)
  }

  /** Each configured file's current bytes (shared memory), by setting name. */
  bytes(): SharedNetworkBytes {
    return Object.fromEntries(this.files.map((f) => [f.setting, f.bytes.buffer as SharedArrayBuffer]))
  }

  /** Calls `fn` with a file's new bytes after each change applied here (the supervisor hands them on). */
  onChange(fn: (setting: string, bytes: SharedArrayBuffer) => void): void {
    this.changed.push(fn)
  }

  /**
   * Starts watching every configured file; resolves once changes are being seen.
   * A worker thread's instead applies what its supervisor hands on.
   */
  async watch(log: DataLog, debounceMs?: number): Promise<void> {
    if (this.feed) {
      const byName = new Map(this.files.map((f) => [f.setting, f]))
      return this.feed.subscribe((setting, bytes) => void byName.get(setting)?.apply(Buffer.from(bytes), log, 'data file updated'))
    }
    for (const f of this.files) {
      const changed = (): void => {
        if (f.reload(log)) for (const fn of this.changed) fn(f.setting, f.bytes.buffer as SharedArrayBuffer)
      }
      this.watchers.push(
        watchPath(f.file, changed, {
          debounceMs,
          onError: (err) =>
            log.error(
              { setting: f.setting, file: f.file, err: { message: err.message } },
              'data file watcher failed; the loaded data stays',
            ),
          onDirectory: (state, dir) =>
            state === 'gone'
              ? log.warn?.(
                  { setting: f.setting, file: f.file, dir },
                  'data file directory removed; the loaded data stays, and the directory is watched for its return',
                )
              : log.info({ setting: f.setting, file: f.file, dir }, 'data file directory (re)created; watching it again'),
        }),
      )
    }
    await Promise.all(this.watchers.map((w) => w.ready))
  }

  async close(): Promise<void> {
    const ws = this.watchers
    this.watchers = []
    await Promise.all(ws.map((w) => w.close()))
  }
}
