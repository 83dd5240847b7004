/**
 * The pure decision → response function, against the exact answers every
 * transport writes (docs/behaviour.md §7): status, header list in order, body.
 * The e2e tests (proxy, decision, grpc-authz, llm-sdk) see the same answers on the wire.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { Decision } from '../../../src/engine/decision.js'
import { decisionResponse } from '../../../src/decision/response.js'

const limit = { policyId: 'api "v1"', limit: 10, remaining: 0, resetS: 7, windowS: 60 }
const RL = [
  'RateLimit-Limit',
  '10',
  'RateLimit-Remaining',
  '0',
  'RateLimit-Reset',
  '7',
  'RateLimit',
  '"api \\"v1\\"";r=0;t=7',
  'RateLimit-Policy',
  '"api \\"v1\\"";q=10;w=60',
]
const base = { mode: 'enforce', matchedPolicies: ['p'] } as const
const json = (body: string): string[] => [
  'content-type',
  'application/json',
  'content-length',
  String(Buffer.byteLength(body)),
  'cache-control',
  'no-store',
]
const reason = (r: string): Decision['reason'] => r as Decision['reason']

const openAi = (message: string): string =>
  JSON.stringify({ error: { message, type: 'rate_limit_error', param: null, code: 'rate_limit_exceeded' } })
const anthropic = (message: string): string => JSON.stringify({ type: 'error', error: { type: 'rate_limit_error', message } })
const TPM = 'Rate limit reached for tokens per minute. Please retry after the time given in Retry-After.'
const PROMPT = 'The prompt is longer than this API key may send in one request.'

interface Case {
  d: Decision
  exposeReason: boolean
  path?: string
  status: number
  headers: string[]
  body: string
}
const CASES: Record<string, Case> = {
  '429 with limit, reason exposed': (() => {
    const body = '{"error":"too_many_requests","reason":"rate_limit_exceeded","retry_after":7}'
    return {
      d: { ...base, allowed: false, status: 429, reason: reason('rate_limit_exceeded'), retryAfterS: 7, limit },
      exposeReason: true,
      status: 429,
      body,
      headers: [...json(body), ...RL, 'Retry-After', '7', 'X-Fairvisor-Reason', 'rate_limit_exceeded'],
    }
  })(),
  '429 with limit, reason hidden': (() => {
    const body = '{"error":"too_many_requests","retry_after":7}'
    return {
      d: { ...base, allowed: false, status: 429, reason: reason('rate_limit_exceeded'), retryAfterS: 7, limit },
      exposeReason: false,
      status: 429,
      body,
      headers: [...json(body), ...RL, 'Retry-After', '7'],
    }
  })(),
  '429 kill switch, no limit': (() => {
    const body = '{"error":"too_many_requests","retry_after":30}'
    return {
      d: { ...base, allowed: false, status: 429, reason: 'kill_switch', retryAfterS: 30 },
      exposeReason: false,
      status: 429,
      body,
      headers: [...json(body), 'Retry-After', '30'],
    }
  })(),
  '503 no bundle': (() => {
    const body = '{"error":"service_unavailable","reason":"no_bundle_loaded"}'
    return {
      d: { ...base, allowed: false, status: 503, reason: 'no_bundle_loaded' },
      exposeReason: true,
      status: 503,
      body,
      headers: [...json(body), 'X-Fairvisor-Reason', 'no_bundle_loaded'],
    }
  })(),
  'LLM tpm on a chat path: OpenAI body, Retry-After': (() => {
    const body = openAi(TPM)
    return {
      d: { ...base, allowed: false, status: 429, reason: reason('tpm_exceeded'), retryAfterS: 3, limit },
      exposeReason: false,
      path: '/v1/chat/completions',
      status: 429,
      body,
      headers: [...json(body), ...RL, 'Retry-After', '3'],
    }
  })(),
  'LLM tpm on a Messages path: Anthropic body': (() => {
    const body = anthropic(TPM)
    return {
      d: { ...base, allowed: false, status: 429, reason: reason('tpm_exceeded'), retryAfterS: 3 },
      exposeReason: true,
      path: '/v1/messages?beta=true',
      status: 429,
      body,
      headers: [...json(body), 'Retry-After', '3', 'X-Fairvisor-Reason', 'tpm_exceeded'],
    }
  })(),
  'LLM pre-check: a 400 in the invalid_request_error shape, x-should-retry false, no Retry-After': (() => {
    const body = JSON.stringify({ type: 'error', error: { type: 'invalid_request_error', message: PROMPT } })
    return {
      d: { ...base, allowed: false, status: 400, reason: reason('prompt_tokens_exceeded') },
      exposeReason: false,
      path: '/anthropic/v1/messages',
      status: 400,
      body,
      headers: [...json(body), 'x-should-retry', 'false'],
    }
  })(),
  'LLM pre-check on a chat path: the reason is the OpenAI code, the decision message wins': (() => {
    const body = JSON.stringify({
      error: { message: 'too big (9 > 5)', type: 'invalid_request_error', param: null, code: 'burst_tokens_exceeded' },
    })
    return {
      d: { ...base, allowed: false, status: 400, reason: reason('burst_tokens_exceeded'), message: 'too big (9 > 5)' },
      exposeReason: true,
      path: '/v1/chat/completions',
      status: 400,
      body,
      headers: [...json(body), 'x-should-retry', 'false', 'X-Fairvisor-Reason', 'burst_tokens_exceeded'],
    }
  })(),
  'LLM reject past the retry bound: 403, x-should-retry false and still the Retry-After': (() => {
    const body = openAi('resets in 20975 s')
    return {
      d: { ...base, allowed: false, status: 403, reason: reason('tpd_exceeded'), retryAfterS: 21_000, limit, message: 'resets in 20975 s' },
      exposeReason: false,
      path: '/v1/responses',
      status: 403,
      body,
      headers: [...json(body), ...RL, 'x-should-retry', 'false', 'Retry-After', '21000'],
    }
  })(),
  'Gemini native: 403 PERMISSION_DENIED past the bound, 400 INVALID_ARGUMENT too large, 429 RESOURCE_EXHAUSTED': (() => {
    const body = JSON.stringify({ error: { code: 403, message: 'resets in 20975 s', status: 'PERMISSION_DENIED' } })
    return {
      d: { ...base, allowed: false, status: 403, reason: reason('tpd_exceeded'), retryAfterS: 21_000, message: 'resets in 20975 s' },
      exposeReason: false,
      path: '/v1beta/models/gemini-2.5-flash:generateContent',
      status: 403,
      body,
      headers: [...json(body), 'x-should-retry', 'false', 'Retry-After', '21000'],
    }
  })(),
  'Gemini native, too large: 400 INVALID_ARGUMENT': (() => {
    const body = JSON.stringify({ error: { code: 400, message: 'too big', status: 'INVALID_ARGUMENT' } })
    return {
      d: { ...base, allowed: false, status: 400, reason: reason('burst_tokens_exceeded'), message: 'too big' },
      exposeReason: false,
      path: '/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse',
      status: 400,
      body,
      headers: [...json(body), 'x-should-retry', 'false'],
    }
  })(),
  'Bedrock, past the bound: 403 ServiceQuotaExceededException (the AWS SDK retries any ThrottlingException), named in x-amzn-ErrorType':
    (() => {
      const body = JSON.stringify({ __type: 'ServiceQuotaExceededException', message: 'resets in 20975 s' })
      return {
        d: { ...base, allowed: false, status: 403, reason: reason('tpd_exceeded'), retryAfterS: 21_000, message: 'resets in 20975 s' },
        exposeReason: false,
        path: '/model/anthropic.claude-3-haiku/converse',
        status: 403,
        body,
        headers: [...json(body), 'x-should-retry', 'false', 'x-amzn-ErrorType', 'ServiceQuotaExceededException', 'Retry-After', '21000'],
      }
    })(),
  'Bedrock: 400 ValidationException too large, 429 ThrottlingException that can pass': (() => {
    const body = JSON.stringify({ __type: 'ValidationException', message: 'too big' })
    return {
      d: { ...base, allowed: false, status: 400, reason: reason('max_tokens_per_request_exceeded'), message: 'too big' },
      exposeReason: false,
      path: '/model/m/converse-stream',
      status: 400,
      body,
      headers: [...json(body), 'x-should-retry', 'false', 'x-amzn-ErrorType', 'ValidationException'],
    }
  })(),
  'Bedrock: 429 ThrottlingException that can pass': (() => {
    const body = JSON.stringify({ __type: 'ThrottlingException', message: TPM })
    return {
      d: { ...base, allowed: false, status: 429, reason: reason('tpm_exceeded'), retryAfterS: 3 },
      exposeReason: false,
      path: '/model/m/converse',
      status: 429,
      body,
      headers: [...json(body), 'x-amzn-ErrorType', 'ThrottlingException', 'Retry-After', '3'],
    }
  })(),
  'Ollama, past the bound: 403 with its {"error"} body': (() => {
    const body = JSON.stringify({ error: 'resets in 20975 s' })
    return {
      d: { ...base, allowed: false, status: 403, reason: reason('tpd_exceeded'), retryAfterS: 21_000, message: 'resets in 20975 s' },
      exposeReason: false,
      path: '/api/chat',
      status: 403,
      body,
      headers: [...json(body), 'x-should-retry', 'false', 'Retry-After', '21000'],
    }
  })(),
}

for (const [name, c] of Object.entries(CASES)) {
  test(`reject: ${name}`, () => {
    assert.deepEqual(decisionResponse(c.d, { exposeReason: c.exposeReason, path: c.path }), {
      status: c.status,
      headers: c.headers,
      body: c.body,
    })
  })
}

test('one limit’s rejects in a row (built from what they share): each answer its own figures; a reloaded limit, its new ones', () => {
  const expected = (l: typeof limit, retry: number, expose: boolean, status: 429 | 503 = 429) => {
    const body = `{"error":"${status === 429 ? 'too_many_requests' : 'service_unavailable'}"${expose ? ',"reason":"rate_limit_exceeded"' : ''},"retry_after":${retry}}`
    const id = '"api \\"v1\\""'
    const rl = ['RateLimit-Limit', String(l.limit), 'RateLimit-Remaining', String(l.remaining), 'RateLimit-Reset', String(l.resetS)]
    rl.push('RateLimit', `${id};r=${l.remaining};t=${l.resetS}`, 'RateLimit-Policy', `${id};q=${l.limit};w=${l.windowS}`)
    return {
      status,
      headers: [...json(body), ...rl, 'Retry-After', String(retry), ...(expose ? ['X-Fairvisor-Reason', 'rate_limit_exceeded'] : [])],
      body,
    }
  }
  const steps: [typeof limit, number, boolean, 429 | 503][] = [
    [limit, 7, true, 429],
    [{ ...limit, remaining: 0, resetS: 6 }, 6, true, 429],
    [{ ...limit, resetS: 123456 }, 123456, false, 429],
    [{ ...limit, limit: 20, windowS: 30, resetS: 2 }, 2, true, 429],
    [{ ...limit, limit: 20, windowS: 30, resetS: 2 }, 2, true, 503],
    [limit, 7, true, 429],
  ]
  for (const [l, retry, expose, status] of steps) {
    const d: Decision = { ...base, allowed: false, status, reason: reason('rate_limit_exceeded'), retryAfterS: retry, limit: l }
    const r = decisionResponse(d, { exposeReason: expose })
    assert.deepEqual(r, expected(l, retry, expose, status))
    assert.notEqual(r.headers, decisionResponse(d, { exposeReason: expose }).headers, 'a new list on every call')
  }
})

test('allow: RateLimit-* of the limit, then the warning; empty body', () => {
  const allowed: Decision = { ...base, allowed: true, status: 200, reason: 'all_rules_passed', limit: { ...limit, remaining: 4 } }
  const rl = [
    'RateLimit-Limit',
    '10',
    'RateLimit-Remaining',
    '4',
    'RateLimit-Reset',
    '7',
    'RateLimit',
    '"api \\"v1\\"";r=4;t=7',
    'RateLimit-Policy',
    '"api \\"v1\\"";q=10;w=60',
  ]
  assert.deepEqual(decisionResponse(allowed, { exposeReason: true }), { status: 200, headers: rl, body: '' })
  const warned: Decision = { ...allowed, warning: 'budget_80' as Decision['warning'] }
  assert.deepEqual(decisionResponse(warned, { exposeReason: true }).headers, [...rl, 'X-Fairvisor-Warning', 'budget_80'])
  const bare: Decision = { ...base, allowed: true, status: 200, reason: 'no_matching_policy' }
  assert.deepEqual(decisionResponse(bare, { exposeReason: true }), { status: 200, headers: [], body: '' })
})

test('debug session: the debug headers come last; X-Fairvisor-Reason once', () => {
  const d: Decision = { ...base, allowed: false, status: 429, reason: 'kill_switch', retryAfterS: 30, policyId: 'p', ruleName: 'r' }
  const debug = [
    'X-Fairvisor-Decision',
    'reject',
    'X-Fairvisor-Mode',
    'enforce',
    'X-Fairvisor-Latency-Us',
    '12',
    'X-Fairvisor-Debug-Decision',
    'reject',
    'X-Fairvisor-Debug-Mode',
    'enforce',
    'X-Fairvisor-Debug-Reason',
    'kill_switch',
    'X-Fairvisor-Debug-Latency-Us',
    '12',
    'X-Fairvisor-Debug-Matched-Policies',
    'p',
  ]
  const exposed = decisionResponse(d, { exposeReason: true, debugLatencyUs: 12 })
  assert.deepEqual(exposed.headers.slice(-debug.length - 4), [...debug, 'X-Fairvisor-Debug-Policy', 'p', 'X-Fairvisor-Debug-Rule', 'r'])
  assert.equal(exposed.headers.filter((h) => h === 'X-Fairvisor-Reason').length, 1)
  // Reason hidden from clients: the debug session still sees it.
  const hidden = decisionResponse(d, { exposeReason: false, debugLatencyUs: 12 })
  assert.deepEqual(hidden.headers.slice(-6), [
    'X-Fairvisor-Reason',
    'kill_switch',
    'X-Fairvisor-Debug-Policy',
    'p',
    'X-Fairvisor-Debug-Rule',
    'r',
  ])
  const allowed = decisionResponse(
    { ...base, allowed: true, status: 200, reason: 'no_matching_policy' },
    { exposeReason: true, debugLatencyUs: 5 },
  )
  assert.deepEqual(allowed.headers.slice(0, 2), ['X-Fairvisor-Decision', 'allow'])
  assert.ok(allowed.headers.includes('X-Fairvisor-Reason'))
})

test('an ambiguous request: 400 with the message; in the API error shape (invalid_request_error) on LLM paths', () => {
  const message = 'the request carries different credentials in authorization and x-api-key'
  const d: Decision = { ...base, allowed: false, status: 400, reason: 'ambiguous_request', message }
  const plain = `{"error":"bad_request","reason":"ambiguous_request","message":${JSON.stringify(message)}}`
  assert.deepEqual(decisionResponse(d, { exposeReason: true, path: '/api/x' }), {
    status: 400,
    headers: [...json(plain), 'X-Fairvisor-Reason', 'ambiguous_request'],
    body: plain,
  })
  const hidden = `{"error":"bad_request","message":${JSON.stringify(message)}}`
  assert.equal(decisionResponse(d, { exposeReason: false }).body, hidden)
  assert.deepEqual(JSON.parse(decisionResponse(d, { exposeReason: true, path: '/v1/chat/completions' }).body), {
    error: { message, type: 'invalid_request_error', param: null, code: null },
  })
  assert.deepEqual(JSON.parse(decisionResponse(d, { exposeReason: true, path: '/v1/messages' }).body), {
    type: 'error',
    error: { type: 'invalid_request_error', message },
  })
})

test('a refused target: 400 bad_request with its reason, no Retry-After', () => {
  const d: Decision = { allowed: false, status: 400, reason: 'encoded_slash', mode: 'enforce', matchedPolicies: [] }
  const body = '{"error":"bad_request","reason":"encoded_slash"}'
  assert.deepEqual(decisionResponse(d, { exposeReason: true }), {
    status: 400,
    headers: [...json(body), 'X-Fairvisor-Reason', 'encoded_slash'],
    body,
  })
  assert.equal(decisionResponse(d, { exposeReason: false }).body, '{"error":"bad_request"}')
})
