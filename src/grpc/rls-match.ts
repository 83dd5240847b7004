/**
 * Which configured limit a descriptor gets, as envoyproxy/ratelimit decides:
 * walk the entries down the tree, at each level the `key_value` node first,
 * then a wildcard value (`prefix*`), then the key-only default; the limit
 * applies only when the last entry lands on a node that has one.
 */
import type { RlsLimit, RlsNode } from './rls-config.js'

export interface Entry {
  key: string
  value: string
}

export function matchLimit(domain: RlsNode, entries: readonly Entry[]): RlsLimit | undefined {
  let level: RlsNode = domain
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i]!
    let next = level.children.get(`${e.key}_${e.value}`)
    if (next === undefined) {
      for (const w of level.wildcards) {
        if (w.key === e.key && e.value.startsWith(w.prefix)) {
          next = w.node
          break
        }
      }
    }
    next ??= level.children.get(e.key)
    if (next === undefined) return undefined
    if (i === entries.length - 1) return next.limit
    if (next.children.size === 0 && next.wildcards.length === 0) return undefined // the request is deeper than the configuration
    level = next
  }
  return undefined
}
