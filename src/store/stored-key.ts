/**
 * The key a remote store keeps for a counter key. Limit keys come from
 * request data (headers, claims, query), so they can be of any length and
 * hold any character; PostgreSQL's primary-key index refuses an entry above
 * ~2.7 KB (SQLSTATE 54000) and text cannot hold NUL (22021). A key of
 * HASH_AT characters or more, or with a NUL, is therefore stored as its
 * first READABLE characters (`tb:<rule>:` and the start of the value stay
 * readable) followed by `#` and the SHA-256 of the whole key in hex.
 *
 * Every hashed form is exactly HASH_AT characters long and every key kept as
 * it is is shorter, so a short key can never name the counter of a long
 * one. The digest is plain,
 * not keyed, so every gateway on a store maps a key alike without sharing a
 * secret; a collision needs a SHA-256 collision.
 */
import { createHash } from 'node:crypto'

/** Readable characters kept before the digest. */
const READABLE = 120
/** Length of a hashed key: readable part, `#`, 64 hex digits. */
const HASH_AT = READABLE + 1 + 64

/** `key` as the store keeps it (unchanged for ordinary keys: one length test and one scan). */
export function storedKey(key: string): string {
  if (key.length < HASH_AT && !key.includes('\0')) return key
  let head = key.slice(0, READABLE).replaceAll('\0', '_')
  // A cut through a surrogate pair would leave a lone half: keep the length, drop the half.
  if (/[\uD800-\uDBFF]$/.test(head)) head = `${head.slice(0, -1)}_`
  return `${head}#${createHash('sha256').update(key).digest('hex')}`
}
