/**
 * Client address (docs/behaviour.md §3 `ip:address`): the socket peer, or, when the peer
 * is a trusted proxy, the right-most X-Forwarded-For hop that is not itself
 * trusted. Walking stops at the first entry that is not an IP address and the
 * last trusted hop seen is used: a garbage header can never make the
 * gateway believe an address nobody trusted vouched for.
 */
import { isIP, type BlockList } from 'node:net'

/** The hex tail of a canonical IPv4-mapped address, `::ffff:808:808`. */
const MAPPED = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/

/**
 * One spelling per client: an IPv6 address in its canonical form (RFC 5952: lower case, zeros
 * compressed, as the WHATWG URL parser writes it), and an IPv4-mapped one (`::ffff:8.8.8.8`,
 * `::FFFF:8.8.8.8`, `::ffff:808:808`, `0:0:0:0:0:ffff:8.8.8.8`) as the plain IPv4 address it
 * is, so a client cannot get fresh buckets by respelling its address. Anything else is kept.
 */
export function normaliseIp(ip: string): string {
  if (ip.indexOf(':') === -1) return ip // IPv4 (or not an address): the common case, untouched
  if (ip.startsWith('::ffff:') && isIP(ip.slice(7)) === 4) return ip.slice(7) // a dual-stack socket's form, fast
  if (isIP(ip) !== 6) return ip
  let canonical: string
  try {
    canonical = new URL(`http://[${ip}]/`).hostname.slice(1, -1)
  } catch {
    return ip.toLowerCase() // a zone id (fe80::1%eth0) is no URL host
  }
  const m = MAPPED.exec(canonical)
  if (m === null) return canonical
  const hi = parseInt(m[1]!, 16)
  const lo = parseInt(m[2]!, 16)
  return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`
}

function isTrusted(list: BlockList, ip: string): boolean {
  const family = isIP(ip)
  return family !== 0 && list.check(ip, family === 4 ? 'ipv4' : 'ipv6')
}

export function clientIp(peer: string, xff: string | undefined, trusted: BlockList | undefined): string {
  let ip = normaliseIp(peer)
  if (!trusted || !xff || !isTrusted(trusted, ip)) return ip
  const hops = xff.split(',')
  for (let i = hops.length - 1; i >= 0; i--) {
    let hop = hops[i]!.trim()
    // Tolerate "[v6]:port" and "v4:port" forms some proxies write.
    if (hop.startsWith('[')) hop = hop.slice(1, hop.indexOf(']') > 0 ? hop.indexOf(']') : undefined)
    else if (hop.indexOf(':') === hop.lastIndexOf(':') && hop.includes(':')) hop = hop.slice(0, hop.indexOf(':'))
    if (isIP(hop) === 0) return ip
    ip = normaliseIp(hop)
    if (!isTrusted(trusted, ip)) return ip
  }
  return ip
}

export function makeTrustCheck(trusted: BlockList): (ip: string) => boolean {
  return (ip) => isTrusted(trusted, normaliseIp(ip))
}
