/**
 * JWT verification with jose: when an HMAC secret or a JWKS (file
 * or URL) is configured, only tokens whose signature, `exp` and `nbf` check
 * out yield `jwt:` values; any other token means no claims. Results are
 * cached per token string (bounded, honouring `exp`) so a client repeating
 * its token pays the signature check once, and a flood of one bad token
 * costs one check.
 */
import { boundedCache, mapKeyOk } from '../bounded-cache.js'
import { readFileSync } from 'node:fs'
import { createLocalJWKSet, createRemoteJWKSet, jwtVerify, type JWTVerifyGetKey } from 'jose'
import { SettingError } from '../errors.js'
import type { Claims } from './jwt.js'

export interface JwtVerifierSettings {
  jwtHmacSecret: string | undefined
  jwksFile: string | undefined
  jwksUrl: string | undefined
}

export interface JwtVerifier {
  /** Verified claims, or null when the token does not verify. `nowMs` bounds cache entries. */
  verify(token: string, nowMs: number): Promise<Claims | null>
}

const CACHE_MAX = 10_000
/** A failed token is remembered this long (a key rotation may make it valid later). */
const NEGATIVE_TTL_MS = 30_000

type KeySource = Uint8Array | JWTVerifyGetKey

function keySource(s: JwtVerifierSettings): { key: KeySource; algorithms: string[] } | undefined {
  const set = [
    s.jwtHmacSecret && 'FAIRVISOR_JWT_HMAC_SECRET',
    s.jwksFile && 'FAIRVISOR_JWKS_FILE',
    s.jwksUrl && 'FAIRVISOR_JWKS_URL',
  ].filter(Boolean) as string[]
  if (set.length > 1) throw new SettingError(set[1]!, `cannot be combined with ${set[0]}; configure one JWT key source`)
  if (s.jwtHmacSecret) {
    if (s.jwtHmacSecret.length < 32)
      throw new SettingError('FAIRVISOR_JWT_HMAC_SECRET', 'must be at least 32 characters (HS256 needs a 256-bit secret)')
    return { key: new TextEncoder().encode(s.jwtHmacSecret), algorithms: ['HS256', 'HS384', 'HS512'] }
  }
  const asymmetric = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA']
  if (s.jwksFile) {
    let jwks: unknown
    try {
      jwks = JSON.parse(readFileSync(s.jwksFile, 'utf8'))
    } catch (err) {
      throw new SettingError('FAIRVISOR_JWKS_FILE', `cannot read a JSON Web Key Set from ${s.jwksFile} (${(err as Error).message})`)
    }
    if (!jwks || typeof jwks !== 'object' || !Array.isArray((jwks as { keys?: unknown }).keys)) {
      throw new SettingError('FAIRVISOR_JWKS_FILE', `${s.jwksFile} must hold a JSON object with a "keys" array`)
    }
    return { key: createLocalJWKSet(jwks as Parameters<typeof createLocalJWKSet>[0]), algorithms: asymmetric }
  }
  if (s.jwksUrl) {
    let url: URL
    try {
      url = new URL(s.jwksUrl)
    } catch {
      throw new SettingError('FAIRVISOR_JWKS_URL', `"${s.jwksUrl}" is not a URL`)
    }
    if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new SettingError('FAIRVISOR_JWKS_URL', 'must be an http(s) URL')
    // jose caches the set and refetches on an unknown kid (at most every 30 s).
    return { key: createRemoteJWKSet(url, { timeoutDuration: 2000, cooldownDuration: 30_000 }), algorithms: asymmetric }
  }
  return undefined
}

/** undefined when no key source is configured (claims are then decoded, not verified). */
export function createJwtVerifier(s: JwtVerifierSettings): JwtVerifier | undefined {
  const source = keySource(s)
  if (!source) return undefined
  const cache = boundedCache<string, { claims: Claims | null; untilMs: number }>(CACHE_MAX)
  const remember = (token: string, claims: Claims | null, untilMs: number): void => {
    if (mapKeyOk(token)) cache.set(token, { claims, untilMs })
  }
  return {
    async verify(token, nowMs) {
      const hit = mapKeyOk(token) ? cache.get(token) : undefined
      if (hit && hit.untilMs > nowMs) return hit.claims
      try {
        const { payload } = await jwtVerify(token, source.key as Uint8Array, {
          algorithms: source.algorithms,
          currentDate: new Date(nowMs),
        })
        const claims = payload as Claims
        remember(token, claims, typeof payload.exp === 'number' ? Math.min(payload.exp * 1000, nowMs + 3_600_000) : nowMs + 3_600_000)
        return claims
      } catch {
        remember(token, null, nowMs + NEGATIVE_TTL_MS)
        return null
      }
    },
  }
}

/** The compact token of an `Authorization: Bearer …` value, if any. */
export function bearerToken(authorization: string | undefined): string | undefined {
  if (authorization?.slice(0, 7).toLowerCase() !== 'bearer ') return undefined
  const t = authorization.slice(7).trim()
  return t === '' ? undefined : t
}
