/**
 * Header names and values read straight from a request's flat raw list
 * ([name, value, …] as received), without building a map: how the bundle's
 * header names match the request's (headerKey, sameHeaderName), the first
 * value of a header (rawHeader), the bearer scheme (BEARER_SCHEME).
 */

/**
 * A header name as limit keys and the bundle write it: lower case, with `_` read as `-`, so
 * `header:x_api_key` (the spelling of nginx's `$http_x_api_key`, as Fairvisor Edge bundles
 * write it) names the header `X-Api-Key`. Only the bundle's spelling is translated: a request
 * header whose own name holds `_` is another header and never matches (sameHeaderName).
 */
export function headerKey(name: string): string {
  return name.toLowerCase().replace(/_/g, '-')
}

/**
 * `raw` is the header `key` (a headerKey()): equal but for ASCII case. `-` and `_` are
 * distinct: nginx drops a request header with `_` in its name by default
 * (`underscores_in_headers off`) and Node, Go and most backends read `X_Api_Key` as a header
 * of its own, so a `X_Api_Key: <junk>` beside `X-Api-Key: <real>` must not be what the gateway
 * counts while the backend authenticates the other. Non-ASCII never matches: no header name
 * holds it, and Unicode case folding would let `K` (U+212A) stand for `k`. Names of another
 * length (nearly all) are passed over on one comparison.
 */
export function sameHeaderName(raw: string, key: string): boolean {
  if (raw.length !== key.length) return false
  for (let i = 0; i < raw.length; i++) {
    let c = raw.charCodeAt(i)
    if (c >= 65 && c <= 90) c += 32 // A-Z
    if (c !== key.charCodeAt(i)) return false
  }
  return true
}

/** First value of header `lowerName` in a flat raw list (case-insensitive), without building a map. */
export function rawHeader(raw: readonly string[], lowerName: string): string | undefined {
  for (let i = 0; i < raw.length; i += 2) {
    const k = raw[i]!
    if (k.length === lowerName.length && k.toLowerCase() === lowerName) return raw[i + 1]
  }
  return undefined
}

/** `Bearer ` at the start of an Authorization value, any case (RFC 9110 §11.1: the scheme is case-insensitive). */
export const BEARER_SCHEME = /^\s*bearer\s/i
