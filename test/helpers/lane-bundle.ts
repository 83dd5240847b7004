/**
 * The bundle the lane tests run on: limit keys from headers (a credential,
 * a plain one, User-Agent), JWT claims, the query, and the client address
 * (X-Forwarded-For through FAIRVISOR_TRUSTED_PROXIES); enforce rules small
 * enough to reject within a test, and shadow rules
 * that never reject, so that every key a request carries is charged.
 */
const rule = (name: string, keys: string[], config: object): object => ({
  name,
  limit_keys: keys,
  algorithm: 'token_bucket',
  // A refill far slower than any test: the same requests give the same answers at any pace.
  algorithm_config: { tokens_per_second: 0.001, burst: 3, ...config },
})
const all = (name: string, keys: string[]): object => rule(name, keys, { burst: 1_000_000 })

export const LANE_BUNDLE = {
  bundle_version: 1,
  policies: [
    {
      id: 'enforce',
      spec: {
        selector: { pathPrefix: '/' },
        rules: [rule('by_key', ['header:x-api-key'], {}), rule('by_sub', ['jwt:sub'], {}), rule('by_query', ['query:k'], { burst: 4 })],
        fallback_limit: rule('by_ip', ['ip:address'], { burst: 1000 }),
      },
    },
    {
      id: 'seen',
      spec: {
        selector: { pathPrefix: '/' },
        mode: 'shadow',
        rules: [
          all('key', ['header:x-api-key']),
          all('user', ['header:x-user']),
          all('ua', ['header:user-agent']),
          all('sub', ['jwt:sub']),
          all('q', ['query:k']),
          all('ip', ['ip:address']),
        ],
      },
    },
  ],
}
