/**
 * Which configured limit a descriptor gets, as envoyproxy/ratelimit decides:
 * walk the entries down the tree, at each level the `key_value` node first,
 * then the first wildcard pattern (`*` anywhere, any number of times) that
 * matches `key_value`, then the key-only default; the limit applies only when
 * the last entry lands on a node that has one.
 */
import type { RlsLimit, RlsNode } from './rls-config.js'

export interface Entry {
  key: string
  value: string
}

/**
 * `value` against a pattern split on `*`: each `*` matches zero or more characters. The first part
 * must start it, the last end it, the middle ones appear in order between without overlapping those.
 */
export function wildcardMatch(parts: readonly string[], value: string): boolean {
  if (parts.length === 1) return parts[0] === value
  const first = parts[0]!
  const last = parts[parts.length - 1]!
  if (value.length < first.length + last.length || !value.startsWith(first) || !value.endsWith(last)) return false
  let from = first.length
  const end = value.length - last.length
  for (let i = 1; i < parts.length - 1; i++) {
    const part = parts[i]!
    const at = value.indexOf(part, from)
    if (at < 0 || at + part.length > end) return false
    from = at + part.length
  }
  return true
}

/**
 * The limit for `entries`, or undefined. When `share` is given, it gets, per entry index, the
 * wildcard value (`files/*`) that entry counts under when it matched a `share_threshold` pattern.
 */
export function matchLimit(domain: RlsNode, entries: readonly Entry[], share?: Array<string | undefined>): RlsLimit | undefined {
  let level: RlsNode = domain
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i]!
    const keyValue = `${e.key}_${e.value}`
    let next = level.children.get(keyValue)
    if (next === undefined) {
      for (const w of level.wildcards) {
        if (wildcardMatch(w.parts, keyValue)) {
          next = w.node
          if (share !== undefined && next.sharePattern !== undefined) share[i] = next.sharePattern
          break
        }
      }
    }
    next ??= level.children.get(e.key)
    if (next === undefined) return undefined
    if (i === entries.length - 1) return next.limit
    if (next.children.size === 0) return undefined // the request is deeper than the configuration
    level = next
  }
  return undefined
}
