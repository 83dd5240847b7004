/**
 * Redis Cluster hash slot of a key: CRC16-XMODEM of the key (or of its
 * `{hash tag}` when one is present and non-empty) modulo 16384, as in the
 * Redis Cluster specification. Computed here so checks can be grouped by
 * slot before any network round trip.
 */
const TABLE = new Uint16Array(256)
for (let i = 0; i < 256; i++) {
  let c = i << 8
  for (let k = 0; k < 8; k++) c = c & 0x8000 ? ((c << 1) ^ 0x1021) & 0xffff : (c << 1) & 0xffff
  TABLE[i] = c
}

function crc16(bytes: Uint8Array, start: number, end: number): number {
  let crc = 0
  for (let i = start; i < end; i++) crc = ((crc << 8) & 0xffff) ^ TABLE[((crc >> 8) ^ bytes[i]!) & 0xff]!
  return crc
}

const encoder = new TextEncoder()

export function keySlot(key: string): number {
  const b = encoder.encode(key)
  const open = b.indexOf(0x7b) // {
  if (open !== -1) {
    const close = b.indexOf(0x7d, open + 1) // }
    if (close > open + 1) return crc16(b, open + 1, close) & 0x3fff
  }
  return crc16(b, 0, b.length) & 0x3fff
}
