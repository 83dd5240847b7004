/**
 * JWT verification with jose: when an HMAC secret or a JWKS (file
 * or URL) is configured, only tokens whose signature, `exp` and `nbf` check
 * out yield `jwt:` values; any other token means no claims, and says why
 * (JwtRejectReason: counted, logged and shown to debug sessions, so a token
 * that quietly fails is not mistaken for a missing one). Results are
 * cached per token string (bounded, honouring `exp`) so a client repeating
 * its token pays the signature check once, and a flood of one bad token
 * costs one check. jose is loaded with the first token checked, so a
 * gateway without a key source never loads it.
 */
import { boundedCache, mapKeyOk } from '../bounded-cache.js'
import { readFileSync } from 'node:fs'
import type { JWTVerifyGetKey } from 'jose'
import { SettingError } from '../errors.js'
import type { Claims } from './jwt.js'

/** Why a token did not verify: the `reason` of fairvisor_jwt_rejected_total (a fixed list, pre-set at 0). */
export const JWT_REJECT_REASONS = ['signature', 'expired', 'not_before', 'malformed', 'unknown_kid', 'jwks_unavailable'] as const
export type JwtRejectReason = (typeof JWT_REJECT_REASONS)[number]

/** A token's verification: its claims, or why it has none (`detail`: jose's sentence, for the log). */
export type JwtResult = { claims: Claims } | { claims: null; rejected: JwtRejectReason; detail: string }

export interface JwtVerifierSettings {
  jwtHmacSecret: string | undefined
  jwksFile: string | undefined
  jwksUrl: string | undefined
}

export interface JwtVerifier {
  /** Verified claims, or why the token does not verify. `nowMs` is the time `exp`/`nbf` are checked at and bounds cache entries. */
  verify(token: string, nowMs: number): Promise<JwtResult>
}

/**
 * What a jose error says about the token. An algorithm the key source does not accept (`none`,
 * or HS256 against a JWKS: the key-confusion attempt) is a `signature` failure: no accepted key
 * signed it. A key set that cannot be fetched or read is `jwks_unavailable` (the token may be
 * fine: the alert is on the key source); an error that is not jose's from a remote key set is
 * its fetch failing. A claim that is not a number where a date belongs is `malformed`.
 */
export function rejectReason(err: unknown, remote: boolean): JwtRejectReason {
  const e = err as { code?: string; claim?: string; reason?: string }
  switch (e.code) {
    case 'ERR_JWS_SIGNATURE_VERIFICATION_FAILED':
    case 'ERR_JOSE_ALG_NOT_ALLOWED':
    case 'ERR_JWKS_MULTIPLE_MATCHING_KEYS':
      return 'signature'
    case 'ERR_JWT_EXPIRED':
      return 'expired'
    case 'ERR_JWT_CLAIM_VALIDATION_FAILED':
      return e.claim === 'nbf' && e.reason === 'check_failed' ? 'not_before' : 'malformed'
    case 'ERR_JWKS_NO_MATCHING_KEY':
      return 'unknown_kid'
    case 'ERR_JWKS_TIMEOUT':
    case 'ERR_JWKS_INVALID':
    case 'ERR_JWK_INVALID':
      return 'jwks_unavailable'
    case 'ERR_JOSE_GENERIC':
      return remote ? 'jwks_unavailable' : 'malformed'
    case undefined:
      return remote ? 'jwks_unavailable' : 'malformed'
    default:
      return 'malformed'
  }
}

const CACHE_MAX = 10_000
/** A failed token is remembered this long (a key rotation may make it valid later). */
const NEGATIVE_TTL_MS = 30_000

type KeySource = Uint8Array | JWTVerifyGetKey
type Jose = typeof import('jose')

/** A configured key source, checked at start-up; `key` makes jose's key from it once jose is loaded. */
interface Source {
  key(jose: Jose): KeySource
  algorithms: string[]
  remote: boolean
}

function keySource(s: JwtVerifierSettings): Source | undefined {
  const set = [
    s.jwtHmacSecret && 'FAIRVISOR_JWT_HMAC_SECRET',
    s.jwksFile && 'FAIRVISOR_JWKS_FILE',
    s.jwksUrl && 'FAIRVISOR_JWKS_URL',
  ].filter(Boolean) as string[]
  if (set.length > 1) throw new SettingError(set[1]!, `cannot be combined with ${set[0]}; configure one JWT key source`)
  if (s.jwtHmacSecret) {
    if (s.jwtHmacSecret.length < 32)
      throw new SettingError('FAIRVISOR_JWT_HMAC_SECRET', 'must be at least 32 characters (HS256 needs a 256-bit secret)')
    const secret = new TextEncoder().encode(s.jwtHmacSecret)
    return { key: () => secret, algorithms: ['HS256', 'HS384', 'HS512'], remote: false }
  }
  const asymmetric = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA']
  if (s.jwksFile) {
    let jwks: unknown
    try {
      jwks = JSON.parse(readFileSync(s.jwksFile, 'utf8'))
    } catch (err) {
      throw new SettingError('FAIRVISOR_JWKS_FILE', `cannot read a JSON Web Key Set from ${s.jwksFile} (${(err as Error).message})`)
    }
    // What jose's createLocalJWKSet requires of a set, checked here at start-up since jose is loaded later.
    const keys = (jwks as { keys?: unknown } | null)?.keys
    if (
      !jwks ||
      typeof jwks !== 'object' ||
      !Array.isArray(keys) ||
      !keys.every((k) => k !== null && typeof k === 'object' && !Array.isArray(k))
    ) {
      throw new SettingError('FAIRVISOR_JWKS_FILE', `${s.jwksFile} must hold a JSON object with a "keys" array of JSON Web Key objects`)
    }
    return {
      key: (jose) => jose.createLocalJWKSet(jwks as Parameters<Jose['createLocalJWKSet']>[0]),
      algorithms: asymmetric,
      remote: false,
    }
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
    return {
      key: (jose) => jose.createRemoteJWKSet(url, { timeoutDuration: 2000, cooldownDuration: 30_000 }),
      algorithms: asymmetric,
      remote: true,
    }
  }
  return undefined
}

/** undefined when no key source is configured (claims are then decoded, not verified). */
export function createJwtVerifier(s: JwtVerifierSettings): JwtVerifier | undefined {
  const source = keySource(s)
  if (!source) return undefined
  // A failed token keeps its reason: every request that brings it again is counted as rejected again.
  const cache = boundedCache<string, { result: JwtResult; untilMs: number }>(CACHE_MAX)
  // jose and the key it makes, once, on the first token (module loading is cached by the runtime anyway).
  let loaded: Promise<{ jwtVerify: Jose['jwtVerify']; key: KeySource }> | undefined
  const jose = () => (loaded ??= import('jose').then((j) => ({ jwtVerify: j.jwtVerify, key: source.key(j) })))
  const remember = (token: string, result: JwtResult, untilMs: number): JwtResult => {
    if (mapKeyOk(token)) cache.set(token, { result, untilMs })
    return result
  }
  return {
    async verify(token, nowMs) {
      const hit = mapKeyOk(token) ? cache.get(token) : undefined
      if (hit && hit.untilMs > nowMs) return hit.result
      try {
        const { jwtVerify, key } = await jose()
        const { payload } = await jwtVerify(token, key as Uint8Array, {
          algorithms: source.algorithms,
          currentDate: new Date(nowMs),
        })
        const untilMs = typeof payload.exp === 'number' ? Math.min(payload.exp * 1000, nowMs + 3_600_000) : nowMs + 3_600_000
        return remember(token, { claims: payload as Claims }, untilMs)
      } catch (err) {
        const rejected = rejectReason(err, source.remote)
        return remember(token, { claims: null, rejected, detail: String((err as Error).message).slice(0, 200) }, nowMs + NEGATIVE_TTL_MS)
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
