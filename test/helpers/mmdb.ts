/**
 * A minimal MaxMind DB (format 2.0) writer, so tests can make small .mmdb
 * files with known answers: the gateway reads operator-supplied GeoLite2 /
 * DB-IP files, which tests cannot download, and no maintained writer is
 * published on npm. IPv6 tree (IPv4 networks live under ::/96, where readers
 * look them up), 24-bit records, every record written once in the data section.
 *
 * Layout: search tree (node_count × 6 bytes), 16 zero bytes, data section,
 * "\xAB\xCD\xEFMaxMind.com", metadata map.
 */
import { isIP } from 'node:net'

export type MmdbValue = string | number | bigint | boolean | MmdbValue[] | { [k: string]: MmdbValue }

/** Type numbers of the format; those above 7 are "extended" (written after a 0 type). */
const T = { utf8: 2, double: 3, uint16: 5, uint32: 6, map: 7, uint64: 9, array: 11, boolean: 14 } as const

function control(type: number, size: number): Buffer {
  const head: number[] = []
  let sizeBits: number
  const extra: number[] = []
  if (size < 29) sizeBits = size
  else if (size < 285) {
    sizeBits = 29
    extra.push(size - 29)
  } else if (size < 65821) {
    sizeBits = 30
    extra.push((size - 285) >> 8, (size - 285) & 255)
  } else {
    sizeBits = 31
    extra.push(((size - 65821) >> 16) & 255, ((size - 65821) >> 8) & 255, (size - 65821) & 255)
  }
  if (type <= 7) head.push((type << 5) | sizeBits)
  else head.push(sizeBits, type - 7)
  return Buffer.from([...head, ...extra])
}

function uint(type: number, n: bigint): Buffer {
  const bytes: number[] = []
  for (let v = n; v > 0n; v >>= 8n) bytes.unshift(Number(v & 255n))
  return Buffer.concat([control(type, bytes.length), Buffer.from(bytes)])
}

export function encode(v: MmdbValue): Buffer {
  if (typeof v === 'string') {
    const b = Buffer.from(v, 'utf8')
    return Buffer.concat([control(T.utf8, b.length), b])
  }
  if (typeof v === 'boolean') return control(T.boolean, v ? 1 : 0)
  if (typeof v === 'bigint') return uint(T.uint64, v)
  if (typeof v === 'number') {
    if (!Number.isInteger(v) || v < 0) {
      const b = Buffer.alloc(8)
      b.writeDoubleBE(v)
      return Buffer.concat([control(T.double, 8), b])
    }
    return uint(v < 65536 ? T.uint16 : v < 2 ** 32 ? T.uint32 : T.uint64, BigInt(v))
  }
  if (Array.isArray(v)) return Buffer.concat([control(T.array, v.length), ...v.map(encode)])
  const entries = Object.entries(v)
  return Buffer.concat([control(T.map, entries.length), ...entries.flatMap(([k, x]) => [encode(k), encode(x)])])
}

/** 128 bits of an address (IPv4 as ::a.b.c.d). */
function bits(address: string): (0 | 1)[] {
  const out: (0 | 1)[] = []
  const push = (byte: number): void => {
    for (let i = 7; i >= 0; i--) out.push(((byte >> i) & 1) as 0 | 1)
  }
  if (isIP(address) === 4) {
    for (let i = 0; i < 12; i++) push(0)
    for (const p of address.split('.')) push(Number(p))
    return out
  }
  if (isIP(address) !== 6) throw new Error(`not an address: ${address}`)
  const [head, tail] = address.includes('::') ? address.split('::') : [address, undefined]
  const h = head ? head.split(':') : []
  const t = tail ? tail.split(':') : []
  const groups = tail === undefined ? h : [...h, ...Array(8 - h.length - t.length).fill('0'), ...t]
  for (const g of groups) {
    const n = parseInt(g, 16)
    push(n >> 8)
    push(n & 255)
  }
  return out
}

interface Node {
  kids: [Node | number | null, Node | number | null]
}

export interface MmdbEntry {
  /** CIDR: `1.2.3.0/24` or `2001:db8::/32`. */
  network: string
  record: MmdbValue
}

/** Bytes of a .mmdb holding `entries` (later, more specific networks may sit inside earlier ones). */
export function writeMmdb(entries: readonly MmdbEntry[], databaseType = 'Test-DB'): Buffer {
  const data: Buffer[] = []
  let dataSize = 0
  const root: Node = { kids: [null, null] }
  for (const e of entries) {
    const [addr, lenText] = e.network.split('/')
    const v4 = isIP(addr!) === 4
    const len = Number(lenText ?? (v4 ? 32 : 128)) + (v4 ? 96 : 0)
    const b = bits(addr!)
    const offset = dataSize
    const enc = encode(e.record)
    data.push(enc)
    dataSize += enc.length
    let node = root
    for (let i = 0; i < len - 1; i++) {
      let next = node.kids[b[i]!]
      // A leaf above a more specific network: push it down into a node with both halves.
      if (!(next instanceof Object)) next = node.kids[b[i]!] = { kids: [next, next] }
      node = next
    }
    node.kids[b[len - 1]!] = offset
  }
  // Number the nodes breadth-first; the root must be node 0.
  const order: Node[] = [root]
  for (let i = 0; i < order.length; i++) for (const k of order[i]!.kids) if (k instanceof Object) order.push(k)
  const index = new Map(order.map((n, i) => [n, i]))
  const count = order.length
  const tree = Buffer.alloc(count * 6)
  order.forEach((n, i) => {
    n.kids.forEach((k, side) => {
      const value = k === null ? count : k instanceof Object ? index.get(k)! : count + 16 + k
      tree.writeUIntBE(value, i * 6 + side * 3, 3)
    })
  })
  const metadata = encode({
    binary_format_major_version: 2,
    binary_format_minor_version: 0,
    build_epoch: BigInt(Math.floor(Date.UTC(2026, 0, 1) / 1000)),
    database_type: databaseType,
    description: { en: 'test database' },
    ip_version: 6,
    languages: ['en'],
    node_count: count,
    record_size: 24,
  })
  return Buffer.concat([tree, Buffer.alloc(16), ...data, Buffer.from('abcdef4d61784d696e642e636f6d', 'hex'), metadata])
}

/** A GeoLite2-Country-shaped record. */
export const countryRecord = (iso: string): MmdbValue => ({
  country: { iso_code: iso, names: { en: iso } },
  registered_country: { iso_code: iso },
})
/** A GeoLite2-ASN-shaped record. */
export const asnRecord = (asn: number, org = `AS${asn} Org`): MmdbValue => ({
  autonomous_system_number: asn,
  autonomous_system_organization: org,
})
