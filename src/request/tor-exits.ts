/**
 * The operator's Tor exit list for `ip:tor`: one address per line, as in
 * the Tor Project's bulk exit list, with `#` comments and blank lines.
 * Addresses are kept in a Set in canonical form, so a lookup is one hash
 * probe whatever the list's size (a BlockList would scan it).
 */
import { isIP } from 'node:net'
import { DataFileError } from '../errors.js'

/** IPv6 in its canonical compressed lowercase form; an IPv4-mapped IPv6 address as its IPv4 (as the client address is). */
export function canonicalIp(ip: string): string {
  if (!ip.includes(':')) return ip
  const v6 = new URL(`http://[${ip}]/`).hostname.slice(1, -1)
  const mapped = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(v6)
  if (mapped === null) return v6
  const hi = parseInt(mapped[1]!, 16)
  const lo = parseInt(mapped[2]!, 16)
  return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`
}

/** Throws an Error naming the line when a line is not an address; an empty list is refused too (a truncated write looks like one). */
export function parseTorExits(text: string, file: string): Set<string> {
  const out = new Set<string>()
  const lines = text.split('\n')
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!.replace(/#.*/, '').trim()
    if (line === '') continue
    if (isIP(line) === 0) throw new DataFileError(`${file}:${i + 1}: "${line}" is not an IP address`)
    out.add(canonicalIp(line))
  }
  if (out.size === 0) throw new DataFileError(`${file} holds no addresses`)
  return out
}

export function isTorExit(list: ReadonlySet<string>, ip: string): boolean {
  if (list.has(ip)) return true
  // The client address may come from X-Forwarded-For in a non-canonical IPv6 spelling.
  if (!ip.includes(':') || isIP(ip) !== 6) return false
  return list.has(canonicalIp(ip))
}
