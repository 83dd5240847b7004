/**
 * The statistics key of a ShouldRateLimit descriptor's limit, built as
 * envoyproxy/ratelimit builds it (its config_impl.go GetLimit):
 * `<domain>.<level>.<level>…`, each level the configured `key_value` that
 * matched, a key-only default as `key`, a wildcard as its pattern; the
 * request's value where the level has `value_to_metric`; with
 * `detailed_metric` on the limit every entry's `key_value` (a
 * `share_threshold` entry keeps its pattern). Then sanitized as upstream
 * names its stats. A limit whose key cannot depend on the request has it
 * computed once per configuration; the others walk the request's entries.
 */
import type { RlsDomain, RlsRule } from './rls-compile.js'
import type { RlsNode } from './rls-config.js'
import { wildcardMatch, type Entry } from './rls-match.js'

/**
 * A configured limit's key: `fixed` when no request changes it, else built per call (`detailed`:
 * its limit's detailed_metric; `shared`: a share_threshold wildcard on its path).
 */
export interface LimitKey {
  fixed: string | undefined
  detailed: boolean
  shared: boolean
}

const trimPrefix = (s: string, prefix: string): string => (s.startsWith(prefix) ? s.slice(prefix.length) : s)

/**
 * Every limit of `domain` (named `name`) with its key. A level matched by a wildcard or marked
 * `value_to_metric`, or a limit with `detailed_metric`, makes the key the request's.
 */
export function limitKeys(name: string, domain: RlsDomain): Map<RlsRule, LimitKey> {
  const out = new Map<RlsRule, LimitKey>()
  const walk = (node: RlsNode, path: string, dynamic: boolean, shared: boolean): void => {
    for (const [mapKey, child] of node.children) {
      const at = `${path}.${mapKey}`
      const changes = dynamic || mapKey.includes('*') || child.valueToMetric === true
      const shares = shared || child.sharePattern !== undefined
      const rule = child.limit && domain.rules.get(child.limit)
      if (child.limit && rule) {
        const detailed = child.limit.detailedMetric
        out.set(rule, { fixed: changes || detailed ? undefined : sanitize(at), detailed, shared: shares })
      }
      walk(child, at, changes, shares)
    }
  }
  walk(domain.root, name, false, false)
  return out
}

/**
 * The key of the limit `entries` matched (the walk of grpc/rls-match.ts, which found it), as
 * upstream builds it for that request; unsanitized.
 */
export function requestKey(name: string, root: RlsNode, entries: readonly Entry[], detailed: boolean): string {
  let byLevel = name
  let share: Array<string | undefined> | undefined
  let level = root
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i]!
    const keyValue = `${e.key}_${e.value}`
    let next = level.children.get(keyValue)
    let pattern: string | undefined
    if (next === undefined)
      for (const w of level.wildcards)
        if (wildcardMatch(w.parts, keyValue)) {
          next = w.node
          pattern = w.parts.join('*')
          break
        }
    const byValue = next !== undefined
    next ??= level.children.get(e.key)
    if (next === undefined) {
      byLevel += `.${e.key}`
      break
    }
    if (pattern !== undefined && next.sharePattern !== undefined) (share ??= [])[i] = trimPrefix(pattern, `${e.key}_`)
    let value = ''
    if (pattern !== undefined) value = share?.[i] ?? (next.valueToMetric ? e.value : trimPrefix(pattern, `${e.key}_`))
    else if (byValue || next.valueToMetric) value = e.value
    byLevel += value === '' ? `.${e.key}` : `.${e.key}_${value}`
    if (next.children.size === 0) break
    level = next
  }
  if (!detailed) return byLevel
  if (share === undefined) return detailedKey(name, entries)
  // detailed_metric with share_threshold levels: those keep their pattern, the others their key_value.
  let out = name
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i]!
    const s = share[i]
    out += s !== undefined ? `.${e.key}_${s}` : e.value === '' ? `.${e.key}` : `.${e.key}_${e.value}`
  }
  return out
}

/** detailed_metric without a share_threshold level: every entry's `key_value` (`key_` for an empty value, as upstream). */
export function detailedKey(name: string, entries: readonly Entry[]): string {
  let out = name
  for (let i = 0; i < entries.length; i++) out += `.${entries[i]!.key}_${entries[i]!.value}`
  return out
}

/** A request's own limit (the descriptor's `limit` override): every entry's `key_value`, as upstream keys it. */
export function overrideKey(name: string, entries: readonly Entry[]): string {
  return `${name}.${entries.map((e) => (e.value === '' ? e.key : `${e.key}_${e.value}`)).join('.')}`
}

const IPV4 = /\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}/g
/** What sanitize could change: most keys have none of it, and the address pattern is slow to scan for. */
const MAYBE = /[:|]|\d\.\d/

/** As upstream's SanitizeStatName: `:` and `|` become `_`, and so do the dots of an IPv4 address. */
export function sanitize(key: string): string {
  if (!MAYBE.test(key)) return key
  return key.replace(/[:|]/g, '_').replace(IPV4, (ip) => ip.replaceAll('.', '_'))
}

/** The Prometheus labels upstream's statsd-exporter mapping reads off a key: the domain, then one or two levels. */
export function keyLabels(key: string): { domain: string; key1: string; key2?: string } {
  const parts = key.split('.')
  const labels: { domain: string; key1: string; key2?: string } = { domain: parts[0]!, key1: parts[1] ?? '' }
  if (parts.length > 2) labels.key2 = parts[2]!
  return labels
}
