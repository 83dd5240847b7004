/**
 * One fixture per validation error (test/fixtures/invalid/<name>.json) and
 * the exact sentence(s) loadBundleFile returns for it: file, JSON pointer,
 * policy/rule, message. `rejects` = a top-level error refused the whole
 * bundle; `drops` = the bundle loaded and that policy alone was dropped.
 */
import assert from 'node:assert/strict'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { bundleHash, loadBundleBytes, loadBundleFile } from '../../../src/bundle/load.js'

const INVALID = fileURLToPath(new URL('../../fixtures/invalid/', import.meta.url))
const BUNDLES = fileURLToPath(new URL('../../fixtures/bundles/', import.meta.url))
/** 2026-01-15: fixtures expire in 2020 and run global_shadow until 2099. */
const NOW = Date.UTC(2026, 0, 15)

type Expect = { rejects: string[] } | { drops: string[] }

function notJson(): string {
  try {
    JSON.parse(readFileSync(join(INVALID, 'not_json.json'), 'utf8'))
  } catch (err) {
    // The parser's own wording differs between Node versions; the sentence around it is ours.
    return `/: the file is not valid JSON (${(err as Error).message.replace(/\s+/g, ' ').trim()}).`
  }
  throw new Error('not_json.json parsed')
}

const CASES: Record<string, Expect> = {
  bundle_expired: { rejects: ['/expires_at: bundle_expired: the bundle expired at 2020-01-01T00:00:00Z.'] },
  bundle_not_object: { rejects: ['/: the bundle must be an object, not [{"bundle_version":1,"policies":[]}].'] },
  bundle_version_missing: { rejects: ['/bundle_version: bundle_version is required but missing.'] },
  bundle_version_string: { rejects: ['/bundle_version: bundle_version must be a number, not "7".'] },
  bundle_version_zero: { rejects: ['/bundle_version: bundle_version must be greater than 0, not 0.'] },
  circuit_breaker_negative_reset: {
    drops: [
      '/policies/0/spec/circuit_breaker/auto_reset_after_minutes: policy "api": auto_reset_after_minutes must be at least 0, not -1.',
    ],
  },
  cost_based_no_reject_at_100: {
    drops: [
      '/policies/0/spec/rules/0/algorithm_config/staged_actions: policy "api", rule "budget": staged_actions must contain exactly one reject action, at threshold_percent 100.',
    ],
  },
  cost_based_thresholds_duplicate: {
    drops: [
      '/policies/0/spec/rules/0/algorithm_config/staged_actions/1/threshold_percent: policy "api", rule "budget": staged_actions thresholds must be distinct (80 is also stage 0).',
    ],
  },
  cost_based_unknown_period: {
    drops: [
      '/policies/0/spec/rules/0/algorithm_config/period: policy "api", rule "budget": period must be one of "5m", "1h", "1d", "7d", "1M", not "1y".',
    ],
  },
  cost_based_throttle_without_delay: {
    drops: [
      '/policies/0/spec/rules/0/algorithm_config/staged_actions/0/delay_ms: policy "api", rule "budget": delay_ms is required but missing.',
    ],
  },
  global_shadow_no_reason: { rejects: ['/global_shadow/reason: reason is required but missing.'] },
  global_shadow_past_expiry: {
    rejects: [
      '/global_shadow/expires_at: global_shadow is enabled but its expires_at 2020-01-01T00:00:00Z is in the past; an enabled global_shadow needs a future expires_at.',
    ],
  },
  host_double_dot: { drops: ['/policies/0/spec/selector/hosts/0: policy "api": host "a..b" must not contain "..".'] },
  host_slash: { drops: ['/policies/0/spec/selector/hosts/0: policy "api": host "a/b" must not contain /, ?, # or @.'] },
  host_space: {
    drops: ['/policies/0/spec/selector/hosts/0: policy "api": host "ex ample" may only contain letters, digits, "." and "-".'],
  },
  host_url: { drops: ['/policies/0/spec/selector/hosts/0: policy "api": host "http://x" must be a bare host name, not a URL.'] },
  issued_at_bad_format: {
    rejects: ['/issued_at: issued_at must be a UTC time written exactly like 2026-01-01T00:00:00Z, not "2026-01-01 00:00:00".'],
  },
  issued_at_impossible_date: { rejects: ['/issued_at: issued_at "2026-02-30T00:00:00Z" is not a real calendar date and time.'] },
  kill_switch_bad_scope_key: {
    rejects: ['/kill_switches/0/scope_key: scope_key must be <source>:<name> with source jwt, header, query, ip or ua, not "tenant".'],
  },
  kill_switch_unknown_descriptor: {
    rejects: ['/kill_switches/0/scope_key: scope_key "ip:city" is unknown; ip: takes address, country, asn, type or tor.'],
  },
  loop_detection_threshold_one: {
    drops: [
      '/policies/0/spec/loop_detection/threshold_identical_requests: policy "api": threshold_identical_requests must be at least 2, not 1.',
    ],
  },
  match_value_object: {
    drops: [
      '/policies/0/spec/rules/0/match/jwt:plan: policy "api", rule "per_ip": the match value of "jwt:plan" must be a string, a number or a boolean, not {"tier":"pro"}.',
    ],
  },
  policies_not_array: { rejects: ['/policies: policies must be an array, not {"id":"api"}.'] },
  policy_bad_mode: { drops: ['/policies/0/spec/mode: policy "api": mode must be one of "enforce", "shadow", not "monitor".'] },
  policy_empty_id: { drops: ['/policies/0/id: policy "#0": id must not be empty.'] },
  policy_missing_id: { drops: ['/policies/0/id: policy "#0": id is required but missing.'] },
  policy_missing_selector: { drops: ['/policies/0/spec/selector: policy "api": selector is required but missing.'] },
  rule_bad_cost_source: {
    drops: [
      '/policies/0/spec/rules/0/algorithm_config/cost_source: policy "api", rule "per_ip": cost_source must be fixed, header:<name> or query:<name>, not "body:tokens".',
    ],
  },
  rule_burst_below_rate: {
    drops: [
      '/policies/0/spec/rules/0/algorithm_config/burst: policy "api", rule "per_ip": burst (10) must be at least tokens_per_second (20).',
    ],
  },
  rule_descriptor_bad_name: {
    drops: [
      '/policies/0/spec/rules/0/limit_keys/0: policy "api", rule "per_ip": descriptor "header:x.api.key" has an invalid name; names match ^[A-Za-z0-9_-]+$.',
    ],
  },
  rule_fixed_cost_zero: {
    drops: ['/policies/0/spec/rules/0/algorithm_config/fixed_cost: policy "api", rule "per_ip": fixed_cost must be greater than 0, not 0.'],
  },
  rule_missing_burst: {
    drops: ['/policies/0/spec/rules/0/algorithm_config/burst: policy "api", rule "per_ip": burst is required but missing.'],
  },
  rule_missing_name: { drops: ['/policies/0/spec/rules/0/name: policy "api", rule "#0": name is required but missing.'] },
  rule_missing_rate: {
    drops: [
      '/policies/0/spec/rules/0/algorithm_config: policy "api", rule "per_ip": algorithm_config must set tokens_per_second (or its alias rps).',
    ],
  },
  rule_max_delay_too_long: {
    drops: [
      '/policies/0/spec/rules/0/algorithm_config/max_delay_ms: policy "api", rule "smooth": max_delay_ms must be at most 30000, not 60000.',
    ],
  },
  rule_max_delay_with_lease: {
    drops: [
      '/policies/0/spec/rules/0/algorithm_config/max_delay_ms: policy "api", rule "smooth": max_delay_ms cannot be combined with lease: a lease hands out tokens the bucket holds now.',
    ],
  },
  rule_status_bad_pattern: {
    drops: [
      '/policies/0/spec/rules/0/count_statuses/1: policy "api", rule "logins": count_statuses[1] must be a status code such as "401" or a class such as "5xx", not "40".',
    ],
  },
  rule_status_both: {
    drops: [
      '/policies/0/spec/rules/0/refund_statuses: policy "api", rule "logins": count_statuses and refund_statuses cannot both be set: count_statuses already charges only the statuses it names.',
    ],
  },
  rule_status_on_llm: {
    drops: [
      '/policies/0/spec/rules/0/refund_statuses: policy "api", rule "chat": refund_statuses cannot be set on a token_bucket_llm rule: its charge is settled on the response\'s reported usage, and an error answer is given back already.',
    ],
  },
  rule_status_on_concurrency: {
    drops: [
      '/policies/0/spec/rules/0/refund_statuses: policy "api", rule "in_flight": refund_statuses cannot be set on a concurrency rule: its slot is given back when the exchange ends, whatever the status.',
    ],
  },
  rule_unknown_algorithm: {
    drops: [
      '/policies/0/spec/rules/0/algorithm: policy "api", rule "per_ip": algorithm must be one of "token_bucket", "cost_based", "token_bucket_llm", "sliding_window", "concurrency", not "leaky_bucket".',
    ],
  },
  rule_unknown_descriptor_source: {
    drops: [
      '/policies/0/spec/rules/0/limit_keys/0: policy "api", rule "per_ip": descriptor "cookie:session" is unknown; use jwt:, header:, query:, ip:, ua:, llm: or descriptor: keys.',
    ],
  },
  rule_unknown_match_key: {
    drops: [
      '/policies/0/spec/rules/0/match/jwt:a~1b: policy "api", rule "per_ip": descriptor "jwt:a/b" has an invalid name; names match ^[A-Za-z0-9_-]+$.',
    ],
  },
  selector_hosts_empty: { drops: ['/policies/0/spec/selector/hosts: policy "api": hosts must not be an empty list.'] },
  selector_prefix_no_slash: { drops: ['/policies/0/spec/selector/pathPrefix: policy "api": pathPrefix must start with /, not "v1/".'] },
  sliding_window_fractional_window: {
    drops: [
      '/policies/0/spec/rules/0/algorithm_config/window_seconds: policy "api", rule "per_ip": window_seconds must be an integer, not 2.5.',
    ],
  },
  sliding_window_max_delay_too_long: {
    drops: [
      '/policies/0/spec/rules/0/algorithm_config/max_delay_ms: policy "api", rule "smooth": max_delay_ms must be at most 30000, not 45000.',
    ],
  },
  sliding_window_missing_window: {
    drops: [
      '/policies/0/spec/rules/0/algorithm_config/window_seconds: policy "api", rule "per_ip": window_seconds is required but missing.',
    ],
  },
  sliding_window_zero_limit: {
    drops: ['/policies/0/spec/rules/0/algorithm_config/limit: policy "api", rule "per_ip": limit must be greater than 0, not 0.'],
  },
  not_json: { rejects: [notJson()] },
  // llm_prices and budgets counted in money (ours)
  cost_based_bad_cost_key: {
    drops: [
      '/policies/0/spec/rules/0/algorithm_config/cost_key: policy "api", rule "spend": cost_key must be fixed, llm_price, header:<name> or query:<name>, not "llm_prices".',
    ],
  },
  cost_based_money_field_without_llm_price: {
    drops: [
      '/policies/0/spec/rules/0/algorithm_config/max_cost_per_request: policy "api", rule "spend": max_cost_per_request applies to a budget counted in money only ("cost_key": "llm_price").',
    ],
  },
  llm_price_budget_decimals: {
    drops: [
      '/policies/0/spec/rules/0/algorithm_config/budget: policy "api", rule "spend": budget (1e-7) has more than six decimals: money is counted in millionths of the currency.',
    ],
  },
  llm_price_fixed_cost: {
    drops: [
      '/policies/0/spec/rules/0/algorithm_config/fixed_cost: policy "api", rule "spend": fixed_cost does not apply to "cost_key": "llm_price": a request costs the price of its call.',
    ],
  },
  llm_price_without_prices: {
    drops: [
      '/policies/0/spec/rules/0/algorithm_config/cost_key: policy "api", rule "spend": "cost_key": "llm_price" needs the bundle\'s llm_prices, the table of what each model costs.',
    ],
  },
  llm_prices_bad_currency: { rejects: ['/llm_prices/currency: currency must be an ISO 4217 code in capitals, such as "USD", not "$".'] },
  llm_prices_case_duplicate: {
    rejects: [
      '/llm_prices/per_million_tokens/GPT-4o: model "GPT-4o" is also written "gpt-4o": names are compared without case, so one price must go.',
    ],
  },
  llm_prices_output_missing: { rejects: ['/llm_prices/per_million_tokens/default/output: output is required but missing.'] },
  llm_prices_price_decimals: {
    rejects: [
      '/llm_prices/per_million_tokens/gpt-4o/cached_input: cached_input (5e-7) has more than six decimals: money is counted in millionths of the currency.',
    ],
  },
  llm_prices_star_inside: {
    rejects: [
      '/llm_prices/per_million_tokens/gpt-*-mini: model "gpt-*-mini" holds a * before its end: only a trailing * (a prefix, "gpt-4o*") is supported.',
    ],
  },
  llm_prices_unknown_field: {
    rejects: [
      '/llm_prices/per_million_tokens/gpt-4o: gpt-4o has a field it does not know: "cached" (it takes input, cached_input, cache_write_input, output).',
    ],
  },
}

test('every invalid fixture has an expectation and every expectation a fixture', () => {
  const files = readdirSync(INVALID)
    .filter((n) => n.endsWith('.json'))
    .map((n) => n.slice(0, -5))
    .sort()
  assert.deepEqual(files, Object.keys(CASES).sort())
})

for (const [name, want] of Object.entries(CASES)) {
  test(`invalid bundle ${name}`, () => {
    const file = join(INVALID, `${name}.json`)
    const r = loadBundleFile(file, NOW)
    const prefixed = (msgs: string[]): string[] => msgs.map((m) => `${file}: ${m}`)
    if ('rejects' in want) {
      assert.equal(r.ok, false, 'a top-level error must reject the whole bundle')
      if (!r.ok) assert.deepEqual(r.errors, prefixed(want.rejects))
    } else {
      assert.equal(r.ok, true, 'a policy-level error must drop the policy alone')
      if (r.ok) {
        assert.deepEqual(r.dropped, prefixed(want.drops))
        assert.equal(r.summary.policies, 0)
        // A dropped policy's "not supported yet" notes would only be noise.
        assert.deepEqual(r.warnings, [])
      }
    }
  })
}

test('a top-level error rejects the bundle even though its policies are valid', () => {
  const r = loadBundleFile(join(INVALID, 'bundle_version_zero.json'), NOW)
  assert.equal(r.ok, false)
})

test('the same bundle loads once the clock is before its expires_at', () => {
  const r = loadBundleFile(join(INVALID, 'bundle_expired.json'), Date.UTC(2019, 0, 1))
  assert.equal(r.ok, true)
})

test('a bad policy is dropped alone; the others load and are enforced', () => {
  const file = join(BUNDLES, 'one_bad_policy.json')
  const r = loadBundleFile(file, NOW)
  assert.ok(r.ok)
  assert.deepEqual(r.dropped, [`${file}: /policies/1/spec/mode: policy "bad": mode must be one of "enforce", "shadow", not "monitor".`])
  assert.deepEqual(
    r.bundle.policies.map((p) => p.id),
    ['also_good', 'good'],
  )
  assert.equal(r.summary.policies, 2)
})

test('duplicate policy ids: the last one wins, with a warning', () => {
  const file = join(BUNDLES, 'duplicate_ids.json')
  const r = loadBundleFile(file, NOW)
  assert.ok(r.ok)
  assert.deepEqual(r.dropped, [])
  assert.deepEqual(r.warnings, [`${file}: /policies/2: policy "api": duplicate policy id; it replaces the policy at /policies/0.`])
  const api = r.bundle.policies.find((p) => p.id === 'api')
  assert.deepEqual(
    api?.rules.map((x) => x.name),
    ['second'],
  )
  assert.equal(r.bundle.policies.length, 2)
})

test('token_bucket_llm, cost_based and ua:bot rules all load without warnings and are supported', () => {
  const file = join(BUNDLES, 'mixed-algorithms.json')
  const r = loadBundleFile(file, NOW)
  assert.ok(r.ok)
  assert.deepEqual(r.dropped, [])
  assert.deepEqual(r.warnings, [])
  assert.deepEqual(
    r.bundle.policies[0]!.rules.map((x) => [x.name, x.supported]),
    [
      ['budget', true],
      ['llm', true],
      ['bots', true],
      ['per_ip', true],
    ],
  )
  assert.equal(r.bundle.llm, true)
})

test('kill switches on ua:bot and ua:bot_category load without warnings', () => {
  const doc = {
    bundle_version: 1,
    policies: [],
    kill_switches: [
      { scope_key: 'ua:bot', scope_value: 'true' },
      { scope_key: 'ua:bot_category', scope_value: 'ai_crawler' },
    ],
  }
  const r = loadBundleBytesOf(doc)
  assert.ok(r.ok)
  assert.deepEqual(r.warnings, [])
})

test('a rule whose fixed_cost is above burst loads with a warning', () => {
  const doc = {
    bundle_version: 1,
    policies: [
      {
        id: 'p',
        spec: {
          selector: { pathPrefix: '/' },
          rules: [{ name: 'r', algorithm: 'token_bucket', algorithm_config: { rps: 1, burst: 2, fixed_cost: 3 } }],
        },
      },
    ],
  }
  const r = loadBundleBytesOf(doc)
  assert.ok(r.ok)
  assert.deepEqual(r.warnings, [
    'mem.json: /policies/0/spec/rules/0/algorithm_config/fixed_cost: policy "p", rule "r": fixed_cost (3) is above burst (2), so every request this rule selects is rejected.',
  ])
})

test('a lease of burst tokens or more loads with a warning; a smaller one without', () => {
  const doc = (tokens: number, burst: number) => ({
    bundle_version: 1,
    policies: [
      {
        id: 'p',
        spec: {
          selector: { pathPrefix: '/' },
          rules: [{ name: 'r', algorithm: 'token_bucket', algorithm_config: { rps: 10, burst, lease: { tokens, ttl_ms: 100 } } }],
        },
      },
    ],
  })
  for (const [tokens, burst] of [
    [20, 20],
    [50, 20],
  ] as const) {
    const r = loadBundleBytesOf(doc(tokens, burst))
    assert.ok(r.ok)
    assert.equal(r.warnings.length, 1, `lease ${tokens}, burst ${burst}`)
    assert.match(
      r.warnings[0]!,
      new RegExp(`/algorithm_config/lease/tokens: policy "p", rule "r": lease.tokens \\(${tokens}\\) is not below burst \\(${burst}\\)`),
    )
  }
  const fine = loadBundleBytesOf(doc(5, 20))
  assert.ok(fine.ok)
  assert.deepEqual(fine.warnings, [])
})

test('count_statuses / refund_statuses need the reverse proxy: in decision_service mode the rule’s policy is dropped, with the pointer', () => {
  const doc = {
    bundle_version: 1,
    policies: [
      {
        id: 'login',
        spec: {
          selector: { pathExact: '/login' },
          rules: [
            { name: 'a', algorithm: 'token_bucket', algorithm_config: { rps: 1, burst: 5 }, count_statuses: ['401'] },
            { name: 'b', algorithm: 'token_bucket', algorithm_config: { rps: 1, burst: 5 }, refund_statuses: ['5xx'] },
          ],
        },
      },
    ],
  }
  const proxy = loadBundleBytes(Buffer.from(JSON.stringify(doc)), 'mem.json', NOW)
  assert.ok(proxy.ok)
  assert.deepEqual(proxy.dropped, [])
  const decision = loadBundleBytes(Buffer.from(JSON.stringify(doc)), 'mem.json', NOW, { mode: 'decision_service' })
  assert.ok(decision.ok)
  assert.deepEqual(decision.dropped, [
    'mem.json: /policies/0/spec/rules/0/count_statuses: policy "login", rule "a": count_statuses needs FAIRVISOR_MODE=reverse_proxy: in decision_service mode the gateway never sees the response, so it cannot tell its status.',
    'mem.json: /policies/0/spec/rules/1/refund_statuses: policy "login", rule "b": refund_statuses needs FAIRVISOR_MODE=reverse_proxy: in decision_service mode the gateway never sees the response, so it cannot tell its status.',
  ])
})

test('with max_delay_ms a burst below the rate is a pacer, not a mistake', () => {
  const doc = (extra: object) => ({
    bundle_version: 1,
    policies: [
      {
        id: 'p',
        spec: {
          selector: { pathPrefix: '/' },
          rules: [{ name: 'r', algorithm: 'token_bucket', algorithm_config: { rps: 5, burst: 1, ...extra } }],
        },
      },
    ],
  })
  const paced = loadBundleBytesOf(doc({ max_delay_ms: 2000 }))
  assert.ok(paced.ok)
  assert.deepEqual([paced.dropped, paced.warnings], [[], []])
  const plain = loadBundleBytesOf(doc({}))
  assert.ok(plain.ok)
  assert.equal(plain.dropped.length, 1, 'without a delay the burst must still cover the rate (as Fairvisor Edge requires)')
})

test('a UTF-8 byte-order mark before the JSON is accepted and kept in the hash', () => {
  const bytes = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"bundle_version":3,"policies":[]}')])
  const r = loadBundleBytes(bytes, 'bom.json', NOW)
  assert.ok(r.ok)
  assert.equal(r.bundle.version, 3)
  assert.equal(r.bundle.hash, bundleHash(bytes))
})

function loadBundleBytesOf(doc: unknown): ReturnType<typeof loadBundleBytes> {
  return loadBundleBytes(Buffer.from(JSON.stringify(doc)), 'mem.json', NOW)
}

test('every error is reported in one pass: top level, schema and semantic errors of every policy', () => {
  const doc = {
    bundle_version: 0,
    policies: [
      { id: 'x', spec: { rules: 'nope' } },
      {
        id: 'h',
        spec: {
          selector: { pathPrefix: '/', hosts: ['a/b'] },
          rules: [
            { name: 'r', algorithm: 'token_bucket', algorithm_config: { rps: 5, burst: 1 } },
            { name: 'q', algorithm: 'token_bucket', algorithm_config: { burst: 1 } },
          ],
        },
      },
    ],
    kill_switches: [{ scope_key: 'ip:city', scope_value: 'x' }],
  }
  const r = loadBundleBytesOf(doc)
  assert.ok(!r.ok)
  assert.deepEqual(r.errors.sort(), [
    'mem.json: /bundle_version: bundle_version must be greater than 0, not 0.',
    'mem.json: /kill_switches/0/scope_key: scope_key "ip:city" is unknown; ip: takes address, country, asn, type or tor.',
    'mem.json: /policies/0/spec/rules: policy "x": rules must be an array, not "nope".',
    'mem.json: /policies/0/spec/selector: policy "x": selector is required but missing.',
    'mem.json: /policies/1/spec/rules/0/algorithm_config/burst: policy "h", rule "r": burst (1) must be at least tokens_per_second (5).',
    'mem.json: /policies/1/spec/rules/1/algorithm_config: policy "h", rule "q": algorithm_config must set tokens_per_second (or its alias rps).',
    'mem.json: /policies/1/spec/selector/hosts/0: policy "h": host "a/b" must not contain /, ?, # or @.',
  ])
})

describe('a policy whose rules all need a jwt: claim', () => {
  const jwtRule = (extra: object = {}): object => ({
    name: 'per_user',
    limit_keys: ['jwt:sub'],
    algorithm: 'token_bucket',
    algorithm_config: { rps: 1, burst: 1 },
    ...extra,
  })
  const fallback = { limit_keys: ['ip:address'], algorithm: 'token_bucket', algorithm_config: { rps: 1, burst: 1 } }
  const warnings = (spec: object): string[] => {
    const r = loadBundleBytesOf({ bundle_version: 1, policies: [{ id: 'p', spec: { selector: { pathPrefix: '/' }, ...spec } }] })
    assert.ok(r.ok)
    return r.warnings
  }

  test('and no fallback_limit: a warning that a garbage or unverifiable token skips every rule', () => {
    assert.deepEqual(warnings({ rules: [jwtRule(), jwtRule({ name: 'by_plan', match: { 'jwt:plan': 'pro' } })] }), [
      'mem.json: /policies/0/spec/rules: policy "p": every rule needs a jwt: claim and the policy has no fallback_limit, so a request whose token is missing, garbage or fails verification is not limited by this policy.',
    ])
  })

  test('with a fallback_limit that a tokenless request reaches (every rule matches on a claim): no warning', () => {
    assert.deepEqual(warnings({ rules: [jwtRule({ match: { 'jwt:plan': 'pro' } })], fallback_limit: fallback }), [])
  })

  test('with a fallback_limit: no warning (it applies when no rule could be applied)', () => {
    assert.deepEqual(warnings({ rules: [jwtRule()], fallback_limit: fallback }), [])
  })

  test('a rule that needs no claim protects the policy: no warning', () => {
    assert.deepEqual(
      warnings({
        rules: [
          jwtRule(),
          { name: 'per_ip', limit_keys: ['ip:address'], algorithm: 'token_bucket', algorithm_config: { rps: 1, burst: 1 } },
        ],
      }),
      [],
    )
  })
})

describe('a fallback_limit keyed on a value a request may lack', () => {
  const tb = { algorithm: 'token_bucket', algorithm_config: { rps: 1, burst: 1 } }
  const jwtRule = { name: 'per_user', limit_keys: ['jwt:sub'], ...tb }
  const warnings = (fallbackKeys: string[], rules: object[] = [jwtRule]): string[] => {
    const r = loadBundleBytesOf({
      bundle_version: 1,
      policies: [{ id: 'p', spec: { selector: { pathPrefix: '/' }, rules, fallback_limit: { limit_keys: fallbackKeys, ...tb } } }],
    })
    assert.ok(r.ok)
    return r.warnings
  }

  test('a header (an API key the selector cannot require): a warning that such requests are unlimited', () => {
    assert.deepEqual(warnings(['header:x-api-key']), [
      'mem.json: /policies/0/spec/fallback_limit/limit_keys: policy "p", rule "fallback_limit": the fallback_limit keys on "header:x-api-key", which a request matching this policy may lack (a selector matches on path, method and host only): such a request is then unlimited by this policy; key the fallback_limit on "ip:address", or add a policy that limits by "ip:address".',
    ])
  })

  test('every such key named once, beside the ones every request has', () => {
    const [w] = warnings(['ip:address', 'query:tenant', 'jwt:org'])
    assert.match(w!, /keys on "query:tenant" and "jwt:org", which a request/)
  })

  test('ip:address, ip:type, ip:tor, ua:bot (every request has them): no warning', () => {
    for (const key of ['ip:address', 'ip:type', 'ip:tor', 'ua:bot']) assert.deepEqual(warnings([key]), [], key)
    assert.deepEqual(warnings([]), [], 'no limit key: one counter for the policy')
  })

  test('the same for a policy whose rules need no claim (the fallback applies when none is selected)', () => {
    const byPlan = { name: 'pro', limit_keys: ['ip:address'], match: { 'header:x-plan': 'pro' }, ...tb }
    assert.equal(warnings(['ua:bot_category'], [byPlan]).length, 1)
  })
})

test('a selector path that is not normalised is loaded with a warning: requests are matched on normalised paths', () => {
  const rule = { name: 'r', limit_keys: [], algorithm: 'token_bucket', algorithm_config: { tokens_per_second: 1, burst: 1 } }
  const doc = {
    bundle_version: 1,
    policies: [
      { id: 'a', spec: { selector: { pathExact: '/api//x' }, rules: [rule] } },
      { id: 'b', spec: { selector: { pathPrefix: '/v1/./admin/', pathExact: '/ok' }, rules: [{ ...rule, name: 'r2' }] } },
      {
        id: 'c',
        spec: {
          selector: { pathPrefix: '/API/', pathCaseSensitive: true, pathTrailingSlashSensitive: true },
          rules: [{ ...rule, name: 'r3' }],
        },
      },
    ],
  }
  const r = loadBundleBytes(Buffer.from(JSON.stringify(doc)), 't.json', NOW)
  assert.ok(r.ok)
  assert.deepEqual(r.warnings, [
    't.json: /policies/0/spec/selector/pathExact: policy "a": "/api//x" is not a normalised path, and requests are matched on theirs: write "/api/x".',
    't.json: /policies/1/spec/selector/pathPrefix: policy "b": "/v1/./admin/" is not a normalised path, and requests are matched on theirs: write "/v1/admin/".',
  ])
})

test('the selector options are booleans', () => {
  const doc = {
    bundle_version: 1,
    policies: [
      {
        id: 'a',
        spec: {
          selector: { pathExact: '/x', pathCaseSensitive: 'yes' },
          rules: [{ name: 'r', limit_keys: [], algorithm: 'token_bucket', algorithm_config: { tokens_per_second: 1, burst: 1 } }],
        },
      },
    ],
  }
  const r = loadBundleBytes(Buffer.from(JSON.stringify(doc)), 't.json', NOW)
  assert.ok(r.ok)
  assert.equal(r.dropped.length, 1)
  assert.match(r.dropped[0]!, /pathCaseSensitive/)
})
