/**
 * FAIRVISOR_TRUSTED_PROXIES: the peers whose X-Forwarded-For is believed, as
 * a BlockList. A list that covers every IPv4 or every IPv6 address is
 * refused: trusting every peer lets any client write its own address into
 * X-Forwarded-For. For that check IPv4 is placed in the IPv4-mapped block
 * (::ffff:0:0/96), as BlockList matches it, so an IPv6 CIDR over that block
 * counts for IPv4 too.
 */
import { BlockList, isIP } from 'node:net'
import { SettingError } from '../errors.js'

interface IpRange {
  addr: string
  family: 4 | 6
  /** Prefix length; 32 or 128 for a single address. */
  prefix: number
}

const ALL_V6 = (1n << 128n) - 1n
const MAPPED = 0xffffn << 32n

function v4(addr: string): bigint {
  return addr.split('.').reduce((n, part) => (n << 8n) | BigInt(Number(part)), 0n)
}

/** An IPv6 address (already checked by isIP) as its 128 bits; an embedded dotted quad and a zone id are understood. */
function v6(addr: string): bigint {
  let text = addr.replace(/%.*$/, '')
  const quad = /(\d+\.\d+\.\d+\.\d+)$/.exec(text)
  if (quad) {
    const n = v4(quad[1]!)
    text = `${text.slice(0, -quad[1]!.length)}${(n >> 16n).toString(16)}:${(n & 0xffffn).toString(16)}`
  }
  const [head, tail] = text.split('::') as [string, string | undefined]
  const left = head === '' ? [] : head.split(':')
  const right = tail === undefined || tail === '' ? [] : tail.split(':')
  const groups = tail === undefined ? left : [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right]
  return groups.reduce((n, g) => (n << 16n) | BigInt(Number.parseInt(g, 16)), 0n)
}

/** 'IPv4' or 'IPv6' when `ranges` leave no address of that family out; undefined otherwise. */
function coversEveryAddress(ranges: readonly IpRange[]): 'IPv4' | 'IPv6' | undefined {
  const spans = ranges
    .map(({ addr, family, prefix }) => {
      const bits = family === 4 ? MAPPED | v4(addr) : v6(addr)
      const hostBits = BigInt((family === 4 ? 32 : 128) - prefix)
      const start = (bits >> hostBits) << hostBits
      return [start, start + (1n << hostBits) - 1n] as const
    })
    .sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
  const covered = (from: bigint, to: bigint): boolean => {
    let next = from
    for (const [start, end] of spans) {
      if (start > next) break
      if (end >= next) next = end + 1n
      if (next > to) return true
    }
    return false
  }
  if (covered(MAPPED, MAPPED | 0xffffffffn)) return 'IPv4'
  return covered(0n, ALL_V6) ? 'IPv6' : undefined
}

/** A list that trusts every address is refused: any client could then write its own address into X-Forwarded-For. */
export function parseTrustedProxies(raw: string, name = 'FAIRVISOR_TRUSTED_PROXIES'): BlockList {
  const list = new BlockList()
  const ranges: IpRange[] = []
  for (const part of raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)) {
    const [addr, prefixText, extra] = part.split('/')
    const family = isIP(addr ?? '')
    if (extra !== undefined || family === 0)
      throw new SettingError(name, `"${part}" is not an IP address or CIDR; use a comma-separated list like 10.0.0.0/8,::1`)
    const type = family === 4 ? 'ipv4' : 'ipv6'
    const max = family === 4 ? 32 : 128
    if (prefixText === undefined) {
      list.addAddress(addr!, type)
      ranges.push({ addr: addr!, family: family as 4 | 6, prefix: max })
      continue
    }
    const prefix = /^\d+$/.test(prefixText) ? Number(prefixText) : NaN
    if (!(prefix >= 0 && prefix <= max)) throw new SettingError(name, `"${part}" has a bad prefix length; use 0 to ${max}`)
    list.addSubnet(addr!, prefix, type)
    ranges.push({ addr: addr!, family: family as 4 | 6, prefix })
  }
  const every = coversEveryAddress(ranges)
  if (every !== undefined)
    throw new SettingError(
      name,
      `"${raw}" trusts every ${every} address, so any client could choose its own address in X-Forwarded-For; list only your proxies' addresses or networks`,
    )
  return list
}
