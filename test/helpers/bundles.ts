/** Bundle files for end-to-end tests. */
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'

/**
 * Writes `dir/bundle.json`: one policy `api` on every path with one token-bucket
 * rule keyed on the `x-user` header, and returns the file's path.
 */
export function writeHeaderBucketBundle(
  dir: string,
  rule: string,
  config: { burst: number; tokens_per_second: number; lease?: { tokens: number; ttl_ms: number } },
): string {
  const file = join(dir, 'bundle.json')
  writeFileSync(
    file,
    JSON.stringify({
      bundle_version: 1,
      policies: [
        {
          id: 'api',
          spec: {
            selector: { pathPrefix: '/' },
            rules: [{ name: rule, limit_keys: ['header:x-user'], algorithm: 'token_bucket', algorithm_config: config }],
          },
        },
      ],
    }),
  )
  return file
}

/**
 * The reload tests' bundle text: one policy `api` on every path with one
 * per-IP token bucket that hardly refills (0.001 token/s), so a client's
 * remaining count shows whether a reload kept its bucket.
 */
export function perIpBundle(version: number, burst = 1000): string {
  return JSON.stringify({
    bundle_version: version,
    policies: [
      {
        id: 'api',
        spec: {
          selector: { pathPrefix: '/' },
          rules: [
            {
              name: 'per_ip',
              limit_keys: ['ip:address'],
              algorithm: 'token_bucket',
              algorithm_config: { tokens_per_second: 0.001, burst },
            },
          ],
        },
      },
    ],
  })
}
