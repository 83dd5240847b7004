/**
 * Deterministic Retry-After jitter (SPEC §7): one client always gets the same
 * value, different clients spread out, so a crowd rejected together does not
 * come back together.
 */
import { createHash } from 'node:crypto'

export function jitterIdentity(subject: string, ip: string, path: string): string {
  return createHash('sha1').update(`fairvisor-retry-jitter|${subject}|${ip}|${path}`).digest().subarray(0, 4).toString('hex')
}

export function retryAfterWithJitter(base: number, policyId: string, ruleName: string, reason: string, identity: string): number {
  const seed = Buffer.from(`retry_jitter:v1|${policyId}|${ruleName}|${reason}||${identity}`, 'utf8')
  let h = 0
  for (let i = 0; i < seed.length; i++) h = (h * 131 + seed[i]!) % 1000003
  const jitter = (h / 1000003) * base * 0.5
  return Math.max(1, Math.ceil(reason === 'budget_exceeded' ? base - jitter : base + jitter))
}
