/**
 * envoyproxy/ratelimit's YAML configuration, read as it is: one document per
 * domain (`domain`, nested `descriptors` of `key` / optional `value`, each
 * with an optional `rate_limit` {unit, requests_per_unit, unlimited, name,
 * replaces}, `shadow_mode`, `detailed_metric`). A file or every .yaml/.yml of
 * a directory; a bad file is refused whole with a message naming where.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { parseAllDocuments } from 'yaml'
import { RlsConfigError } from '../errors.js'

export { RlsConfigError }

/** Seconds per unit, as envoyproxy/ratelimit divides time (a month is 30 days, a year 365): windows start at multiples of it since the epoch. */
export const UNIT_SECONDS = { second: 1, minute: 60, hour: 3600, day: 86_400, week: 604_800, month: 2_592_000, year: 31_536_000 } as const
export type Unit = keyof typeof UNIT_SECONDS
/** RateLimitResponse.RateLimit.Unit. */
export const UNIT_CODE: Record<Unit, number> = { second: 1, minute: 2, hour: 3, day: 4, month: 5, year: 6, week: 7 }

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
}

export interface RlsNode {
  limit: RlsLimit | undefined
  /** `key_value` and `key` (key-only default) → child. */
  children: Map<string, RlsNode>
  /** Values ending in `*`: prefix → child, tried after an exact value. */
  wildcards: Array<{ key: string; prefix: string; node: RlsNode }>
}

export type RlsConfig = Map<string, RlsNode>

const newNode = (limit?: RlsLimit): RlsNode => ({ limit, children: new Map(), wildcards: [] })

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

function parseLimit(raw: unknown, where: string, shadow: boolean, detailedMetric: boolean): RlsLimit {
  if (!isObject(raw)) throw new RlsConfigError(`${where}.rate_limit must be a mapping`)
  const unlimited = raw.unlimited === true
  const unit = typeof raw.unit === 'string' ? raw.unit.toLowerCase() : undefined
  const rpu = raw.requests_per_unit
  if (!unlimited) {
    if (unit === undefined || !(unit in UNIT_SECONDS))
      throw new RlsConfigError(`${where}.rate_limit.unit "${String(raw.unit)}" is not one of ${Object.keys(UNIT_SECONDS).join(', ')}`)
    if (typeof rpu !== 'number' || !Number.isInteger(rpu) || rpu < 0 || rpu > 0xffffffff)
      throw new RlsConfigError(`${where}.rate_limit.requests_per_unit must be an integer from 0 to 4294967295`)
  } else if (unit !== undefined || rpu !== undefined)
    throw new RlsConfigError(`${where}.rate_limit: unlimited takes no unit or requests_per_unit`)
  const replaces = raw.replaces === undefined ? [] : raw.replaces
  if (!Array.isArray(replaces) || !replaces.every((r) => isObject(r) && typeof r.name === 'string' && r.name !== ''))
    throw new RlsConfigError(`${where}.rate_limit.replaces must be a list of {name: …}`)
  if (raw.name !== undefined && typeof raw.name !== 'string') throw new RlsConfigError(`${where}.rate_limit.name must be a string`)
  return {
    unit: (unit ?? 'second') as Unit,
    requestsPerUnit: unlimited ? 0 : (rpu as number),
    unlimited,
    name: raw.name as string | undefined,
    replaces: replaces.map((r: { name: string }) => r.name),
    shadow,
    detailedMetric,
  }
}

function parseDescriptors(list: unknown, where: string, into: RlsNode): void {
  if (list === undefined || list === null) return
  if (!Array.isArray(list)) throw new RlsConfigError(`${where}.descriptors must be a list`)
  for (const [i, raw] of list.entries()) {
    const at = `${where}.descriptors[${i}]`
    if (!isObject(raw) || typeof raw.key !== 'string' || raw.key === '') throw new RlsConfigError(`${at} needs a non-empty key`)
    const value = raw.value === undefined || raw.value === null ? '' : String(raw.value)
    const node = newNode(
      raw.rate_limit === undefined ? undefined : parseLimit(raw.rate_limit, at, raw.shadow_mode === true, raw.detailed_metric === true),
    )
    if (node.limit !== undefined && raw.quota_mode === true) node.limit.quota = true
    parseDescriptors(raw.descriptors, at, node)
    if (value.endsWith('*')) {
      into.wildcards.push({ key: raw.key, prefix: value.slice(0, -1), node })
      continue
    }
    const mapKey = value === '' ? raw.key : `${raw.key}_${value}`
    if (into.children.has(mapKey)) throw new RlsConfigError(`${at}: duplicate descriptor ${mapKey}`)
    into.children.set(mapKey, node)
  }
}

/** One YAML text (one or more documents) into `into`; `source` names it in errors. */
export function parseRlsYaml(text: string, source: string, into: RlsConfig = new Map()): RlsConfig {
  for (const doc of parseAllDocuments(text)) {
    if (doc.errors.length) throw new RlsConfigError(`${source}: ${doc.errors[0]!.message}`)
    const root: unknown = doc.toJS()
    if (root === null || root === undefined) continue
    if (!isObject(root) || typeof root.domain !== 'string' || root.domain === '')
      throw new RlsConfigError(`${source}: a configuration needs a non-empty domain`)
    if (into.has(root.domain)) throw new RlsConfigError(`${source}: duplicate domain ${root.domain}`)
    const node = newNode()
    parseDescriptors(root.descriptors, `${source}: ${root.domain}`, node)
    into.set(root.domain, node)
  }
  return into
}

/** A file, or every .yaml / .yml file of a directory (as envoyproxy/ratelimit loads its runtime directory). */
export function loadRlsConfig(path: string): RlsConfig {
  const config: RlsConfig = new Map()
  const files = statSync(path).isDirectory()
    ? readdirSync(path)
        .filter((f) => /\.ya?ml$/.test(f) && !f.startsWith('.'))
        .sort()
        .map((f) => join(path, f))
    : [path]
  for (const file of files) parseRlsYaml(readFileSync(file, 'utf8'), file, config)
  return config
}
