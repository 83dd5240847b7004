/**
 * envoyproxy/ratelimit's YAML configuration, read as it is: one document per
 * domain (`domain`, nested `descriptors` of `key` / optional `value`, each
 * with an optional `rate_limit` {unit, requests_per_unit, unlimited, name,
 * replaces}, `shadow_mode`, `quota_mode`, `detailed_metric`, `value_to_metric`,
 * `share_threshold`, `metadata`). A file or every .yaml/.yml of
 * a directory; a bad file is refused whole with a message naming where.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { createRequire } from 'node:module'
import { RlsConfigError } from '../errors.js'

/** yaml is loaded with the first RLS configuration read: a gateway without one never loads it. */
const require = createRequire(import.meta.url)

export { RlsConfigError }

/** Seconds per unit, as envoyproxy/ratelimit divides time (a month is 30 days, a year 365): windows start at multiples of it since the epoch. */
export const UNIT_SECONDS = { second: 1, minute: 60, hour: 3600, day: 86_400, week: 604_800, month: 2_592_000, year: 31_536_000 } as const
export type Unit = keyof typeof UNIT_SECONDS
/** RateLimitResponse.RateLimit.Unit. */
export const UNIT_CODE: Record<Unit, number> = { second: 1, minute: 2, hour: 3, day: 4, month: 5, year: 6, week: 7 }
/** The unit of a code (a request's limit override), undefined for UNKNOWN and codes past WEEK. */
export const UNIT_OF_CODE: ReadonlyArray<Unit | undefined> = [undefined, 'second', 'minute', 'hour', 'day', 'month', 'year', 'week']

export interface RlsLimit {
  unit: Unit
  requestsPerUnit: number
  unlimited: boolean
  name: string | undefined
  replaces: string[]
  shadow: boolean
  detailedMetric: boolean
  /** quota_mode: over alone does not make the call OVER_LIMIT; every quota descriptor of it over does. */
  quota?: boolean
  /** The descriptor's `metadata:` (a mapping, not empty): the answer's dynamic metadata when the descriptor passes. */
  metadata?: Record<string, unknown>
}

export interface RlsNode {
  limit: RlsLimit | undefined
  /** `key_value` and `key` (key-only default) → child; a wildcard value is here too, under its literal `key_va*lue`. */
  children: Map<string, RlsNode>
  /** Values with `*` anywhere, in file order: tried after an exact value, the first that matches wins. */
  wildcards: RlsWildcard[]
  /** `share_threshold` on a wildcard: every value it matches counts under the pattern (`files/*`) instead. */
  sharePattern: string | undefined
  /** `value_to_metric`: the request's value names this level in the statistics key (grpc/rls-stats-key.ts). */
  valueToMetric?: true
}

/** A `key_value` pattern split on `*` once at load, so a request matches it without allocating. */
export interface RlsWildcard {
  parts: string[]
  node: RlsNode
}

export type RlsConfig = Map<string, RlsNode>

const newNode = (limit?: RlsLimit, sharePattern?: string): RlsNode => ({ limit, children: new Map(), wildcards: [], sharePattern })

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

/** Every key envoyproxy/ratelimit knows, at any level: any other is a misspelling, refused rather than silently ignored. */
const VALID_KEYS = new Set([
  'domain',
  'key',
  'value',
  'descriptors',
  'rate_limit',
  'unit',
  'requests_per_unit',
  'unlimited',
  'shadow_mode',
  'quota_mode',
  'name',
  'replaces',
  'detailed_metric',
  'value_to_metric',
  'share_threshold',
  'metadata',
])

/** Keys checked as envoyproxy/ratelimit checks them, on the document read with its keys' own types. */
function validateKeys(node: Map<unknown, unknown>, source: string): void {
  for (const [k, v] of node) {
    if (typeof k !== 'string') throw new RlsConfigError(`${source}: config error, key is not of type string: ${String(k)}`)
    if (!VALID_KEYS.has(k)) throw new RlsConfigError(`${source}: config error, unknown key '${k}'`)
    if (k === 'metadata') continue // free-form
    if (v instanceof Map) validateKeys(v, source)
    else if (Array.isArray(v))
      for (const e of v) {
        if (!(e instanceof Map))
          throw new RlsConfigError(`${source}: config error, yaml file contains list of type other than map: ${String(e)}`)
        validateKeys(e, source)
      }
  }
}

/**
 * A refusal worded as envoyproxy/ratelimit words it (`<file>: <message>`, so what operators grep
 * for still matches), then where in the file, which upstream does not say.
 */
const refused = (source: string, message: string, at: string): RlsConfigError => new RlsConfigError(`${source}: ${message} (at ${at})`)

function parseLimit(raw: unknown, source: string, at: string, shadow: boolean, detailedMetric: boolean): RlsLimit {
  if (!isObject(raw)) throw refused(source, 'rate_limit must be a mapping', at)
  const unlimited = raw.unlimited === true
  const unit = typeof raw.unit === 'string' ? raw.unit.toLowerCase() : undefined
  const validUnit = unit !== undefined && unit in UNIT_SECONDS
  // An absent requests_per_unit is 0, as upstream reads it (every request over the limit).
  const rpu = raw.requests_per_unit ?? 0
  if (unlimited) {
    if (validUnit) throw refused(source, 'should not specify rate limit unit when unlimited', at)
  } else {
    if (!validUnit)
      throw refused(source, `invalid rate limit unit '${String(raw.unit ?? '')}'`, `${at}; one of ${Object.keys(UNIT_SECONDS).join(', ')}`)
    if (typeof rpu !== 'number' || !Number.isInteger(rpu) || rpu < 0 || rpu > 0xffffffff)
      throw refused(source, 'rate_limit.requests_per_unit must be an integer from 0 to 4294967295', at)
  }
  if (raw.name !== undefined && raw.name !== null && typeof raw.name !== 'string')
    throw refused(source, 'rate_limit.name must be a string', at)
  const name = typeof raw.name === 'string' && raw.name !== '' ? raw.name : undefined
  const replaces = raw.replaces ?? []
  if (!Array.isArray(replaces) || !replaces.every(isObject)) throw refused(source, 'rate_limit.replaces must be a list of {name: …}', at)
  const names = replaces.map((r) => r.name)
  if (names.some((n) => typeof n !== 'string' || n === '')) throw refused(source, 'should not have an empty replaces entry', at)
  // A limit replacing itself would silently disable it.
  if (name !== undefined && names.includes(name)) throw refused(source, 'replaces should not contain name of same descriptor', at)
  return {
    unit: (validUnit ? unit : 'second') as Unit,
    requestsPerUnit: unlimited ? 0 : (rpu as number),
    unlimited,
    name,
    replaces: names as string[],
    shadow,
    detailedMetric,
  }
}

/**
 * `parentKey` is the composite key so far (`domain.key_value.`), as upstream names a duplicate;
 * `where` the place in the file (`domain.descriptors[0]…`), for our part of a message.
 */
function parseDescriptors(list: unknown, source: string, where: string, parentKey: string, into: RlsNode): void {
  if (list === undefined || list === null) return
  if (!Array.isArray(list)) throw refused(source, 'descriptors must be a list', where)
  for (const [i, raw] of list.entries()) {
    const at = `${where}.descriptors[${i}]`
    if (!isObject(raw) || raw.key === undefined || raw.key === null || raw.key === '') throw refused(source, 'descriptor has empty key', at)
    const key = String(raw.key)
    const value = raw.value === undefined || raw.value === null ? '' : String(raw.value)
    const mapKey = value === '' ? key : `${key}_${value}`
    if (into.children.has(mapKey)) throw refused(source, `duplicate descriptor composite key '${parentKey}${mapKey}'`, at)
    const wildcard = mapKey.includes('*')
    if (raw.share_threshold === true && !wildcard)
      throw refused(source, `share_threshold can only be used with wildcard values (containing '*'), but found key '${mapKey}'`, at)
    const node = newNode(
      raw.rate_limit === undefined || raw.rate_limit === null
        ? undefined
        : parseLimit(raw.rate_limit, source, at, raw.shadow_mode === true, raw.detailed_metric === true),
      raw.share_threshold === true ? value : undefined,
    )
    if (node.limit !== undefined && raw.quota_mode === true) node.limit.quota = true
    // As envoyproxy/ratelimit: a mapping of anything, kept with the limit (a descriptor without one never reports it).
    const metadata = raw.metadata
    if (metadata !== undefined && metadata !== null && !isObject(metadata))
      throw refused(source, 'error parsing metadata: not a mapping', at)
    if (node.limit !== undefined && isObject(metadata) && Object.keys(metadata).length > 0) node.limit.metadata = metadata
    if (raw.value_to_metric === true) node.valueToMetric = true
    parseDescriptors(raw.descriptors, source, at, `${parentKey}${mapKey}.`, node)
    // As envoyproxy/ratelimit: the pattern is the whole `key_value`, so a `*` matches across the key/value join too.
    if (wildcard) into.wildcards.push({ parts: mapKey.split('*'), node })
    into.children.set(mapKey, node)
  }
}

/**
 * One YAML text (one or more documents) into `into`; `source` names it in errors. `merge`
 * (MERGE_DOMAIN_CONFIG): a domain seen before gets this document's descriptors added to it, as
 * envoyproxy/ratelimit merges one domain split over several files; a descriptor both define is still refused.
 */
export function parseRlsYaml(text: string, source: string, into: RlsConfig = new Map(), merge = false): RlsConfig {
  const { parseAllDocuments } = require('yaml') as typeof import('yaml')
  for (const doc of parseAllDocuments(text)) {
    if (doc.errors.length) throw new RlsConfigError(`${source}: error loading config file: ${doc.errors[0]!.message}`)
    const typed: unknown = doc.toJS({ mapAsMap: true })
    if (typed === null || typed === undefined) continue
    if (!(typed instanceof Map)) throw new RlsConfigError(`${source}: error loading config file: not a mapping`)
    validateKeys(typed, source)
    const root = doc.toJS() as Record<string, unknown>
    if (typeof root.domain !== 'string' || root.domain === '') throw new RlsConfigError(`${source}: config file cannot have empty domain`)
    const seen = into.get(root.domain)
    if (seen !== undefined && !merge) throw new RlsConfigError(`${source}: duplicate domain '${root.domain}' in config file`)
    const node = seen ?? newNode()
    parseDescriptors(root.descriptors, source, root.domain, `${root.domain}.`, node)
    into.set(root.domain, node)
  }
  return into
}

/** A file, or every .yaml / .yml file of a directory (as envoyproxy/ratelimit loads its runtime directory). */
export function loadRlsConfig(path: string, merge = false): RlsConfig {
  const config: RlsConfig = new Map()
  const files = statSync(path).isDirectory()
    ? readdirSync(path)
        .filter((f) => /\.ya?ml$/.test(f) && !f.startsWith('.'))
        .sort()
        .map((f) => join(path, f))
    : [path]
  for (const file of files) parseRlsYaml(readFileSync(file, 'utf8'), file, config, merge)
  return config
}
