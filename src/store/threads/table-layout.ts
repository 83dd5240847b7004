/**
 * The counter table's memory (table.ts holds what is done with it): one
 * SharedArrayBuffer of a header, then per slot an expiry and the CELLS
 * doubles a limit kind packs its state into, a 64-bit key fingerprint, and a
 * lock word per bucket of WAYS slots.
 */
import { CELLS } from '../../algorithms/algorithm.js'
import { sipKey } from './siphash.js'

/** Slots per bucket. */
export const WAYS = 16
/** Bytes per slot: fingerprint (2 × int32), expiry (double), CELLS doubles; plus a lock word per bucket. */
export const SLOT_BYTES = 8 + 8 + CELLS * 8
const HEADER_BYTES = 64
// Header int32 words.
export const H_BUCKETS = 0
export const H_USED = 1
export const H_SWEEP = 2
// Header bigint64 words (byte offset 16).
export const B_FULL = 0
export const B_EXPIRED = 1
/** Byte offset of the 16-byte hash seed in the header. */
export const SEED_AT = 48

/** A new zeroed table buffer of at most `maxBytes` bytes, `seed` (16 bytes) in its header. */
export function tableBuffer(maxBytes: number, seed: Uint8Array): SharedArrayBuffer {
  const buckets = Math.floor((maxBytes - HEADER_BYTES) / (WAYS * SLOT_BYTES + 4))
  if (buckets < 1) throw new RangeError(`a shared table needs more than ${HEADER_BYTES + WAYS * SLOT_BYTES + 4} bytes`)
  sipKey(seed) // checks its length
  const buffer = new SharedArrayBuffer(layout(buckets).total)
  new Int32Array(buffer, 0, 4)[H_BUCKETS] = buckets
  new Uint8Array(buffer, SEED_AT, 16).set(seed)
  return buffer
}

/** Where each array of a table of `buckets` buckets starts, and its total size. */
export function layout(buckets: number): { locks: number; fp: number; expireAt: number; cells: number; total: number } {
  const slots = buckets * WAYS
  // Doubles first after the header (8-byte aligned), then the int32 arrays.
  const expireAt = HEADER_BYTES
  const cells = expireAt + slots * 8
  const fp = cells + slots * CELLS * 8
  const lockStart = fp + slots * 8
  return { locks: lockStart, fp, expireAt, cells, total: lockStart + buckets * 4 }
}
