/**
 * MaxMind-format databases (GeoLite2 / GeoIP2 Country, City and ASN; DB-IP
 * Lite Country and ASN, which use the same record layout) for `ip:country`
 * and `ip:asn`, read with the `maxmind` package. The whole file is read into
 * memory (GeoLite2-Country is ~9 MB, ASN ~10 MB) so a lookup never touches
 * the disk and a replaced file cannot change under a running reader.
 */
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import type { Reader, Response } from 'maxmind'
import { DataFileError } from '../errors.js'
import { boundedCache } from '../bounded-cache.js'

/** maxmind is loaded with the first database: a gateway without GeoIP files never loads it. */
const require = createRequire(import.meta.url)

/** Decoded records remembered (least recently used out): a country database has a few hundred distinct records, an ASN one ~80k. */
const RECORD_CACHE_ENTRIES = 8192

interface GeoRecord {
  country?: { iso_code?: string }
  registered_country?: { iso_code?: string }
  autonomous_system_number?: number
}

export class GeoDatabase {
  readonly type: string
  readonly builtAt: Date
  private readonly reader: Reader<Response>

  /** Throws (with the reason) when `bytes` is not a MaxMind DB. */
  constructor(readonly bytes: Buffer) {
    // The reader decodes records by offset; caching the decoded ones saves rebuilding the same objects per request.
    const { Reader: MmdbReader } = require('maxmind') as typeof import('maxmind')
    this.reader = new MmdbReader<Response>(bytes, { cache: boundedCache<number, NonNullable<unknown>>(RECORD_CACHE_ENTRIES) })
    const m = this.reader.metadata
    // A file that merely ends in something metadata-like (or a truncated copy) must not pass as a database.
    if (
      !(
        Number.isInteger(m.nodeCount) &&
        m.nodeCount > 0 &&
        (m.ipVersion === 4 || m.ipVersion === 6) &&
        m.searchTreeSize + 16 <= bytes.length
      )
    ) {
      throw new DataFileError('not a MaxMind DB (bad metadata)')
    }
    this.type = String(m.databaseType)
    this.builtAt = m.buildEpoch
  }

  static fromFile(file: string): GeoDatabase {
    return new GeoDatabase(readFileSync(file))
  }

  private record(ip: string): GeoRecord | undefined {
    try {
      return (this.reader.get(ip) as GeoRecord | null) ?? undefined
    } catch {
      // Not an address the reader understands (e.g. an IPv6 zone id, or IPv6 in an IPv4-only file): nothing known.
      return undefined
    }
  }

  /**
   * ISO 3166-1 alpha-2 country of `ip`. The registered country stands in
   * when the database has no located country (GeoLite2 does this for some
   * anycast and satellite ranges), as a country is still better than none.
   */
  country(ip: string): string | undefined {
    const r = this.record(ip)
    return r?.country?.iso_code ?? r?.registered_country?.iso_code
  }

  /** Autonomous system number of `ip`, as digits (the form X-ASN and the ASN map use). */
  asn(ip: string): string | undefined {
    const n = this.record(ip)?.autonomous_system_number
    return typeof n === 'number' ? String(n) : undefined
  }
}
