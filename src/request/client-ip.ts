/**
 * Client address (docs/behaviour.md §3 `ip:address`): the socket peer, or, when the peer
 * is a trusted proxy, the right-most X-Forwarded-For hop that is not itself
 * trusted. Walking stops at the first entry that is not an IP address and the
 * last trusted hop seen is used: a garbage header can never make the
 * gateway believe an address nobody trusted vouched for.
 */
import { isIP, type BlockList } from 'node:net'

export function normaliseIp(ip: string): string {
  // IPv4-mapped IPv6 (dual-stack sockets) is the same client as plain IPv4.
  return ip.startsWith('::ffff:') && isIP(ip.slice(7)) === 4 ? ip.slice(7) : ip
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
