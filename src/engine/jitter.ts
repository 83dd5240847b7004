/**
 * Deterministic Retry-After jitter (docs/behaviour.md §7): one client always gets the same
 * value, different clients spread out, so a crowd rejected together does not
 * come back together. Added to the wait, never taken from it: Retry-After is
 * never earlier than the moment the request could pass.
 *
 * Rejects are the hot path of an attack, so both halves are memoised: the
 * SHA-1 identity per (subject, ip, path), and the rolling hash of the seed's
 * fixed prefix per (policy, rule, reason) — the hash is sequential, so only
 * the 8 hex characters of the identity are hashed per reject. Both memos are
 * keyed by the parts themselves (nested Maps), not by a joined string.
 */
import { BoundedMemo3 } from '../bounded-cache.js'
import { hash } from 'node:crypto'
import { jitterMaxS } from '../algorithms/index.js'

const MOD = 1000003
/** Bound of each memo; cleared whole when reached (cheaper than LRU upkeep, still bounded). */
const MEMO_MAX = 10_000
const identities = new BoundedMemo3<string>(MEMO_MAX)
const prefixes = new BoundedMemo3<number>(MEMO_MAX)

export function jitterIdentity(subject: string, ip: string, path: string): string {
  let id = identities.get(path, ip, subject)
  if (id === undefined) {
    id = hash('sha1', `fairvisor-retry-jitter|${subject}|${ip}|${path}`, 'hex').slice(0, 8)
    identities.set(path, ip, subject, id)
  }
  return id
}

function rollBytes(h: number, text: string): number {
  const bytes = Buffer.from(text, 'utf8')
  for (let i = 0; i < bytes.length; i++) h = (h * 131 + bytes[i]!) % MOD
  return h
}

export function retryAfterWithJitter(base: number, policyId: string, ruleName: string, reason: string, identity: string): number {
  let h = prefixes.get(policyId, ruleName, reason)
  if (h === undefined) {
    h = rollBytes(0, `retry_jitter:v1|${policyId}|${ruleName}|${reason}||`)
    prefixes.set(policyId, ruleName, reason, h)
  }
  // The identity is lowercase hex (ASCII): its UTF-8 bytes are its char codes.
  for (let i = 0; i < identity.length; i++) h = (h * 131 + identity.charCodeAt(i)) % MOD
  // Only ever added: the base is when the request could pass, and a client back before then fails again.
  const spread = base * 0.5
  const max = jitterMaxS(reason)
  const jitter = spread > max ? (h / MOD) * max : (h / MOD) * base * 0.5
  return Math.max(1, Math.ceil(base + jitter))
}
