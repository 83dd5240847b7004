/**
 * JWT claims from `Authorization: Bearer a.b.c`. Decoding only (docs/behaviour.md §3):
 * a malformed token yields no claims, never an error.
 */
export type Claims = Record<string, unknown>

export function decodeBearer(authorization: string | undefined): Claims | undefined {
  if (!authorization || authorization.length < 8) return undefined
  if (authorization.slice(0, 7).toLowerCase() !== 'bearer ') return undefined
  const token = authorization.slice(7).trim()
  const a = token.indexOf('.')
  const b = a < 0 ? -1 : token.indexOf('.', a + 1)
  if (a <= 0 || b < 0 || token.indexOf('.', b + 1) !== -1) return undefined
  const payload = token.slice(a + 1, b)
  if (!/^[A-Za-z0-9_-]+={0,2}$/.test(payload)) return undefined
  try {
    const value: unknown = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'))
    return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Claims) : undefined
  } catch {
    return undefined
  }
}

/** A claim as a descriptor value: scalars as strings; objects, arrays, null and "" are missing. */
export function claimString(value: unknown): string | undefined {
  if (typeof value === 'string') return value === '' ? undefined : value
  if (typeof value === 'number' || typeof value === 'boolean') return String(value)
  return undefined
}
