/**
 * `fairvisor init [--template api|llm|webhook] [--out file] [--force]`: write a
 * starter bundle to stdout or a file. JSON has no comments, so the
 * explanations sit in "_comment" keys: unknown keys are ignored by the
 * gateway at every level used here (never inside `match`, whose keys are
 * descriptors). Each template passes `fairvisor validate`.
 */
import { writeFileSync } from 'node:fs'
import { parseArgs, UsageError } from './args.js'

const USAGE = 'usage: fairvisor init [--template api|llm|webhook] [--out file] [--force]'

const COMMON = [
  'Starter bundle written by `fairvisor init`. Check it with `fairvisor validate <file>`,',
  'try it with `fairvisor test <file> --requests <file.jsonl>`, then point FAIRVISOR_CONFIG_FILE at it.',
  'On every change raise bundle_version: a reload applies only a strictly greater version.',
  'Keys named _comment are ignored by the gateway.',
]

export const TEMPLATES: Record<string, () => object> = {
  api: () => ({
    _comment: [...COMMON, 'Template "api": a per-API-key limit on /v1/, a per-address limit for callers without a key, and a stricter limit on logins.'],
    bundle_version: 1,
    policies: [
      {
        id: 'api',
        _comment: 'Every request under /v1/. Start new policies with "mode": "shadow", read the would_reject log lines, then switch to "enforce".',
        spec: {
          selector: { pathPrefix: '/v1/', _comment: 'pathPrefix matches by segments: /v1/ matches /v1/users but not /v1 or /v1beta.' },
          mode: 'enforce',
          rules: [
            {
              name: 'per_api_key',
              _comment: 'One bucket per X-Api-Key value: 20 requests/s sustained, bursts of 100. A request without the header skips this rule.',
              limit_keys: ['header:x-api-key'],
              algorithm: 'token_bucket',
              algorithm_config: { tokens_per_second: 20, burst: 100 },
            },
          ],
          fallback_limit: {
            name: 'anonymous_per_ip',
            _comment: 'Used when no rule was selected. Behind a load balancer set FAIRVISOR_TRUSTED_PROXIES so ip:address is the client, not the balancer.',
            limit_keys: ['ip:address'],
            algorithm: 'token_bucket',
            algorithm_config: { tokens_per_second: 2, burst: 10 },
          },
        },
      },
      {
        id: 'login',
        _comment: 'Brute-force guard: POST /login, 5 attempts then one every 10 s per client address.',
        spec: {
          selector: { pathExact: '/login', methods: ['POST'] },
          rules: [
            {
              name: 'login_per_ip',
              limit_keys: ['ip:address'],
              algorithm: 'token_bucket',
              algorithm_config: { tokens_per_second: 0.1, burst: 5 },
            },
          ],
        },
      },
    ],
  }),
  llm: () => ({
    _comment: [...COMMON, 'Template "llm": an OpenAI-compatible endpoint limited per user (JWT sub claim) in requests and in tokens.'],
    bundle_version: 1,
    policies: [
      {
        id: 'llm',
        _comment: 'Chat and completion calls. jwt:sub is read from Authorization: Bearer; a request without a token skips the per-user rules.',
        spec: {
          selector: { pathPrefix: '/v1/', methods: ['POST'] },
          mode: 'enforce',
          rules: [
            {
              name: 'requests_per_user',
              _comment: 'At most 1 request/s per user on average, bursts of 10.',
              limit_keys: ['jwt:sub'],
              algorithm: 'token_bucket',
              algorithm_config: { tokens_per_second: 1, burst: 10 },
            },
            {
              name: 'tokens_per_user',
              _comment: 'LLM token budget per user. This build loads token_bucket_llm rules with a "not supported yet" warning and skips them at request time.',
              limit_keys: ['jwt:sub'],
              algorithm: 'token_bucket_llm',
              algorithm_config: {
                tokens_per_minute: 20000,
                tokens_per_day: 500000,
                max_tokens_per_request: 8000,
                default_max_completion: 1000,
                token_source: { estimator: 'simple_word' },
              },
            },
          ],
          fallback_limit: {
            name: 'llm_anonymous_per_ip',
            _comment: 'Callers without a token: 1 request every 5 s per address.',
            limit_keys: ['ip:address'],
            algorithm: 'token_bucket',
            algorithm_config: { tokens_per_second: 0.2, burst: 2 },
          },
        },
      },
    ],
  }),
  webhook: () => ({
    _comment: [...COMMON, 'Template "webhook": inbound webhooks limited per sender, so one noisy integration cannot starve the others.'],
    bundle_version: 1,
    policies: [
      {
        id: 'webhooks',
        _comment: 'POST /hooks/<sender>/... Senders retry in bursts after an outage, so the burst is generous and the rate modest.',
        spec: {
          selector: { pathPrefix: '/hooks/', methods: ['POST'] },
          mode: 'shadow',
          rules: [
            {
              name: 'per_sender',
              _comment: 'Keyed on the X-Webhook-Source header your senders set (e.g. stripe, github).',
              limit_keys: ['header:x-webhook-source'],
              algorithm: 'token_bucket',
              algorithm_config: { tokens_per_second: 50, burst: 500 },
            },
          ],
          fallback_limit: {
            name: 'unknown_sender_per_ip',
            _comment: 'Requests without X-Webhook-Source: per address.',
            limit_keys: ['ip:address'],
            algorithm: 'token_bucket',
            algorithm_config: { tokens_per_second: 5, burst: 20 },
          },
          _comment: 'Shadow first: would-be rejects are only logged (would_reject). Switch mode to enforce once the log is quiet.',
        },
      },
    ],
  }),
}

export async function run(args: string[]): Promise<number> {
  let template: string, out: string | undefined, force: boolean
  try {
    const a = parseArgs(args, ['template', 'out'], ['force'])
    if (a.positional.length) throw new UsageError(`unexpected argument ${a.positional[0]}`)
    template = a.options.get('template') ?? 'api'
    if (!(template in TEMPLATES)) throw new UsageError(`--template must be one of ${Object.keys(TEMPLATES).join(', ')}, not "${template}"`)
    out = a.options.get('out')
    force = a.flags.has('force')
  } catch (err) {
    if (!(err instanceof UsageError)) throw err
    process.stderr.write(`fairvisor init: ${err.message}\n${USAGE}\n`)
    return 2
  }
  const text = `${JSON.stringify(TEMPLATES[template]!(), null, 2)}\n`
  if (out === undefined || out === '-') {
    process.stdout.write(text)
    return 0
  }
  try {
    writeFileSync(out, text, { flag: force ? 'w' : 'wx' })
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code
    process.stderr.write(`fairvisor init: cannot write ${out} (${code === 'EEXIST' ? 'it exists; add --force to overwrite' : code ?? (err as Error).message})\n`)
    return 1
  }
  process.stderr.write(`wrote ${out} (template ${template}); next: fairvisor validate ${out}\n`)
  return 0
}
