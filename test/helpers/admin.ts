/** The admin API's tests (unit and end to end): a bundle with every kind of rule it names, the token, and calls. */
import { loadBundleBytes } from '../../src/bundle/load.js'
import type { CompiledBundle } from '../../src/bundle/compile.js'

export const ADMIN_TOKEN = 'admin-token-for-tests-0123456789'

/**
 * Policy `api` (enforce, every path): `per_user` (token bucket by x-user, burst 2, hardly refilling),
 * `per_key` (by x-api-key, a credential, burst 1), loop detection; policy `llm` (shadow, under
 * /v1/chat/): an LLM rule with a day counter; policy `tiers`: a fallback by x-tier.
 */
export function adminBundleText(version = 1): string {
  const bucket = (burst: number) => ({ burst, tokens_per_second: 0.001 })
  return JSON.stringify({
    bundle_version: version,
    policies: [
      {
        id: 'api',
        spec: {
          selector: { pathPrefix: '/' },
          rules: [
            { name: 'per_user', limit_keys: ['header:x-user'], algorithm: 'token_bucket', algorithm_config: bucket(2) },
            { name: 'per_key', limit_keys: ['header:x-api-key'], algorithm: 'token_bucket', algorithm_config: bucket(1) },
          ],
          loop_detection: { enabled: true, window_seconds: 60, threshold_identical_requests: 1000 },
        },
      },
      {
        id: 'llm',
        spec: {
          selector: { pathPrefix: '/v1/chat/' },
          mode: 'shadow',
          rules: [
            {
              name: 'tokens',
              limit_keys: ['header:x-user'],
              algorithm: 'token_bucket_llm',
              algorithm_config: { tokens_per_minute: 1000, tokens_per_day: 5000 },
            },
          ],
        },
      },
      {
        id: 'tiers',
        spec: {
          selector: { pathPrefix: '/tiers/' },
          rules: [
            {
              name: 'gold',
              limit_keys: ['header:x-user'],
              match: { 'header:x-tier': 'gold' },
              algorithm: 'token_bucket',
              algorithm_config: bucket(5),
            },
          ],
          fallback_limit: { name: 'free', limit_keys: ['header:x-user'], algorithm: 'token_bucket', algorithm_config: bucket(1) },
        },
      },
    ],
  })
}

/** The bundle compiled as the gateway compiles it. */
export function adminBundle(version = 1): CompiledBundle {
  const r = loadBundleBytes(Buffer.from(adminBundleText(version)), '/etc/fairvisor/bundle.json', Date.now())
  if (!r.ok) throw new Error(JSON.stringify(r))
  return r.bundle
}
