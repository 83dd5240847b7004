/**
 * The operator's ASN → network-type map for `ip:type` (docs/behaviour.md §3), in nginx
 * `map` syntax: lines `<asn> <type>;`, optionally inside `map … { … }`, with
 * `#` comments. ASNs may be written `13335` or `AS13335`. Read by
 * network-data.ts: a bad line stops start-up naming the file and the line,
 * and on a reload keeps the last good map.
 */
import { SettingError } from '../errors.js'

export const IP_TYPES: ReadonlySet<string> = new Set([
  'business',
  'education_research',
  'government_admin',
  'hosting',
  'isp',
  'unrouted',
  'unknown',
])

/** `AS13335`, `as13335` and `13335` are the same ASN. */
export function normaliseAsn(raw: string): string {
  const t = raw.trim()
  return /^as\d+$/i.test(t) ? t.slice(2) : t
}

export function parseAsnMap(text: string, file: string): Map<string, string> {
  const out = new Map<string, string>()
  text.split('\n').forEach((rawLine, i) => {
    const line = rawLine.replace(/#.*/, '').trim()
    if (line === '' || line === '}' || /^map\s.*\{$/.test(line) || /^(default|hostnames)\b/.test(line)) return
    const m = /^(?:AS)?(\d+)\s+([a-z_]+)\s*;$/i.exec(line)
    if (!m) throw new SettingError('FAIRVISOR_ASN_MAP_FILE', `${file}:${i + 1}: "${rawLine.trim()}" is not "<asn> <type>;"`)
    const type = m[2]!.toLowerCase()
    if (!IP_TYPES.has(type))
      throw new SettingError('FAIRVISOR_ASN_MAP_FILE', `${file}:${i + 1}: type "${m[2]}" is not one of ${[...IP_TYPES].join(', ')}`)
    out.set(m[1]!, type)
  })
  return out
}
