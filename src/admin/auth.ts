/**
 * The admin API's bearer token (FAIRVISOR_ADMIN_TOKEN; docs/admin.md). The token presented and the
 * one configured are both hashed (SHA-256) and the digests compared with crypto.timingSafeEqual:
 * equal lengths whatever was sent, so neither the comparison's time nor an early length test tells
 * how much of a guess was right.
 */
import { createHash, timingSafeEqual } from 'node:crypto'

const digest = (text: string): Buffer => createHash('sha256').update(text, 'utf8').digest()

/** `Authorization: Bearer <token>` (scheme case-insensitive, RFC 7235); undefined for anything else. */
export function bearerOf(header: string | undefined): string | undefined {
  const m = /^Bearer +(\S+) *$/i.exec(header ?? '')
  return m?.[1]
}

/** Whether an Authorization header carries `token`; the same work for a missing, malformed or wrong one. */
export function tokenCheck(token: string): (authorization: string | undefined) => boolean {
  const want = digest(token)
  return (authorization) => {
    const presented = bearerOf(authorization)
    const same = timingSafeEqual(digest(presented ?? ''), want)
    return same && presented !== undefined
  }
}
