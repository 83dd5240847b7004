/**
 * The starter bundles of `fairvisor init`. JSON has no comments, so the
 * explanations sit in "_comment" keys: unknown keys are ignored by the
 * gateway at every level used here (never inside `match`, whose keys are
 * descriptors). Each template passes `fairvisor validate`.
 */

const COMMON = [
  'Starter bundle written by `fairvisor init`. Check it with `fairvisor validate <file>`,',
  'try it with `fairvisor test <file> --requests <file.jsonl>`, then point FAIRVISOR_CONFIG_FILE at it.',
  'On every change raise bundle_version: a reload applies only a strictly greater version.',
  'Keys named _comment are ignored by the gateway.',
]

export const TEMPLATES: Record<string, () => object> = {
  api: () => ({
    _comment: [
      ...COMMON,
      'Template "api": a per-API-key limit on /v1/, a per-address limit for callers without a key, and a stricter limit on logins.',
    ],
    bundle_version: 1,
    policies: [
      {
        id: 'api',
        _comment:
          'Every request under /v1/. Start new policies with "mode": "shadow", read the would_reject log lines, then switch to "enforce".',
        spec: {
          selector: { pathPrefix: '/v1/', _comment: 'pathPrefix matches by segments: /v1/ matches /v1/users but not /v1 or /v1beta.' },
          mode: 'enforce',
          rules: [
            {
              name: 'per_api_key',
              _comment:
                'One bucket per X-Api-Key value: 20 requests/s sustained, bursts of 100. A request without the header skips this rule.',
              limit_keys: ['header:x-api-key'],
              algorithm: 'token_bucket',
              algorithm_config: { tokens_per_second: 20, burst: 100 },
            },
          ],
          fallback_limit: {
            name: 'anonymous_per_ip',
            _comment:
              'Used when no rule was selected. Behind a load balancer set FAIRVISOR_TRUSTED_PROXIES so ip:address is the client, not the balancer.',
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
        _comment:
          'Chat and completion calls. jwt:sub is read from Authorization: Bearer; a request without a token skips the per-user rules.',
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
              _comment:
                'LLM tokens per user: the prompt (BPE-counted) plus max_tokens are reserved before the call and settled against the usage the API reports; streams end at max_completion_tokens.',
              limit_keys: ['jwt:sub'],
              algorithm: 'token_bucket_llm',
              algorithm_config: {
                tokens_per_minute: 20000,
                tokens_per_day: 500000,
                max_tokens_per_request: 8000,
                max_completion_tokens: 4096,
                default_max_completion: 1000,
                token_source: { estimator: 'tokenizer', encoding: 'o200k_base' },
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
  budget: () => ({
    _comment: [
      ...COMMON,
      'Template "budget": a monthly-style spend cap per tenant, here per UTC day, with a warning and a slow-down before the hard stop.',
    ],
    bundle_version: 1,
    policies: [
      {
        id: 'tenant-spend',
        _comment:
          'Every request costs what X-Request-Cost says (at least 1; 1 when absent). Periods: 5m, 1h, 1d or 7d (weeks start Sunday 00:00 UTC).',
        spec: {
          selector: { pathPrefix: '/' },
          mode: 'shadow',
          rules: [
            {
              name: 'daily_spend',
              _comment:
                'From 80 % the response carries X-Fairvisor-Warning: budget_warn; from 95 % requests wait 500 ms (budget_throttle); above 100 % they are rejected budget_exceeded until the period ends.',
              limit_keys: ['header:x-tenant-id'],
              algorithm: 'cost_based',
              algorithm_config: {
                budget: 10000,
                period: '1d',
                cost_key: 'header:x-request-cost',
                staged_actions: [
                  { threshold_percent: 80, action: 'warn' },
                  { threshold_percent: 95, action: 'throttle', delay_ms: 500 },
                  { threshold_percent: 100, action: 'reject' },
                ],
              },
            },
          ],
          _comment:
            'Shadow first: nothing is delayed or rejected, would-be rejects are logged (would_reject). Switch mode to enforce when the figures look right.',
        },
      },
    ],
  }),
  agent: () => ({
    _comment: [
      ...COMMON,
      'Template "agent": guards for autonomous agents calling your API: loop detection and a spend circuit breaker, on top of a per-key bucket.',
    ],
    bundle_version: 1,
    policies: [
      {
        id: 'agents',
        spec: {
          selector: { pathPrefix: '/v1/' },
          mode: 'enforce',
          loop_detection: {
            enabled: true,
            _comment:
              'The 10th identical request (method, path, sorted query, API key) within 60 s is rejected loop_detected; "throttle" delays instead, "warn" only flags it.',
            window_seconds: 60,
            threshold_identical_requests: 10,
            action: 'reject',
            similarity: 'exact',
          },
          circuit_breaker: {
            enabled: true,
            _comment:
              'When the spend per minute (the cost of the first rule) reaches 2000, every request of the policy is rejected circuit_breaker_open for 10 minutes (0: until the next reload).',
            spend_rate_threshold_per_minute: 2000,
            action: 'reject',
            auto_reset_after_minutes: 10,
            alert: true,
          },
          rules: [
            {
              name: 'per_api_key',
              limit_keys: ['header:x-api-key'],
              algorithm: 'token_bucket',
              algorithm_config: { tokens_per_second: 20, burst: 100, cost_source: 'header:x-request-cost' },
            },
          ],
        },
      },
    ],
  }),
}
