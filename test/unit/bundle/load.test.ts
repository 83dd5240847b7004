/**
 * Every example bundle in policies/ loads with no error, no dropped policy
 * and no warning, and does what its _comment says.
 */
import assert from 'node:assert/strict'
import { readdirSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { loadBundleFile } from '../../../src/bundle/load.js'
import type { CompiledBundle } from '../../../src/bundle/compile.js'
import { Harness, T0, type Req } from '../../helpers/engine-harness.js'

const DIR = fileURLToPath(new URL('../../../policies/', import.meta.url))
const FILES = readdirSync(DIR)
  .filter((n) => n.endsWith('.json'))
  .sort()

function load(name: string): CompiledBundle {
  const r = loadBundleFile(join(DIR, name), T0)
  assert.ok(r.ok, r.ok ? '' : r.errors.join('\n'))
  assert.deepEqual(r.dropped, [])
  assert.deepEqual(r.warnings, [])
  assert.ok(r.summary.policies >= 1)
  return r.bundle
}

/** Number of identical requests allowed before the first reject (at one instant), up to `max`. */
function allowedInARow(h: Harness, req: Req, max = 1000): number {
  for (let i = 0; i < max; i++) if (!h.run(req).allowed) return i
  return max
}

test('policies/ holds the examples', () => {
  for (const f of [
    'quickstart.json',
    'per-user-jwt.json',
    'per-api-key.json',
    'per-ip.json',
    'query-cost.json',
    'header-cost.json',
    'plan-fallback.json',
    'host-scoped.json',
    'login-exact.json',
    'shadow-mode.json',
    'kill-switch.json',
    'global-shadow.json',
    'composite-key.json',
  ]) {
    assert.ok(FILES.includes(f), f)
  }
})

for (const name of FILES) {
  test(`policies/${name} loads with no error, drop or warning`, () => {
    load(name)
  })
}

const chatBody = (chars: number, extra: object = {}): string =>
  JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hello world '.repeat(chars / 12) }], ...extra })

const BEHAVIOUR: Record<string, (h: Harness) => void> = {
  'llm-openai.json': (h) => {
    const req = (body: string, key = 'Bearer sk-1'): Req => ({
      method: 'POST',
      path: '/v1/chat/completions',
      headers: { authorization: key },
      body,
    })
    const d = h.run(req(chatBody(1200, { max_tokens: 50000 })))
    // 100 × "hello world " is 201 o200k tokens + 6 of chat framing; the completion is capped at 4096.
    assert.deepEqual(
      d.llm?.map((r) => [r.prompt, r.reserved]),
      [[207, 207 + 4096]],
    )
    assert.equal(d.limit?.remaining, 30000 - 4303)
    assert.equal(h.run(req(chatBody(120_000))).reason, 'prompt_tokens_exceeded')
    assert.equal(allowedInARow(h, req(chatBody(1200, { max_tokens: 4000 }), 'Bearer sk-2')), 7) // 30000 / 4207
    assert.equal(h.run(req(chatBody(1200, { max_tokens: 4000 }), 'Bearer sk-2')).reason, 'tpm_exceeded')
    // Azure's api-key header carrying the same key is the same bucket.
    assert.equal(
      h.run({ method: 'POST', path: '/v1/chat/completions', headers: { 'api-key': 'sk-2' }, body: chatBody(40) }).reason,
      'tpm_exceeded',
    )
    // Azure OpenAI (deployments with api-version, and its v1 API) and Gemini's OpenAI-compatible API: the same limits.
    for (const [path, key, rule] of [
      ['/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21', 'api-key', 'azure_openai_tokens_per_key'],
      ['/openai/v1/chat/completions', 'api-key', 'azure_openai_tokens_per_key'],
      ['/openai/v1/responses', 'authorization', 'azure_openai_tokens_per_key'],
      ['/v1beta/openai/chat/completions', 'authorization', 'gemini_openai_tokens_per_key'],
    ] as const) {
      const value = key === 'authorization' ? 'Bearer sk-3' : 'sk-3'
      const q = path.indexOf('?')
      const d = h.run({
        method: 'POST',
        path: q === -1 ? path : path.slice(0, q),
        query: q === -1 ? '' : path.slice(q + 1),
        headers: { [key]: value },
        body: chatBody(1200, { max_tokens: 50000 }),
      })
      assert.deepEqual(
        d.llm?.map((r) => [r.ruleName, r.reserved]),
        [[rule, 207 + 4096]],
        path,
      )
      assert.equal(
        h.run({ method: 'POST', path, headers: { [key]: value }, body: chatBody(120_000) }).reason,
        'prompt_tokens_exceeded',
        path,
      )
    }
  },
  'llm-spend.json': (h) => {
    const req = (model: string, maxTokens: number, key = 'sk-1'): Req => ({
      method: 'POST',
      path: '/v1/chat/completions',
      headers: { authorization: `Bearer ${key}` },
      body: chatBody(1200, { model, max_tokens: maxTokens }),
    })
    // 207 o200k tokens of prompt (as above) at 2.5 USD per million, 1000 of output at 10: 0.0105175 USD, rounded up to the micro.
    const d = h.run(req('gpt-4o-2024-08-06', 1000))
    assert.deepEqual(
      d.spend?.map((s) => [s.model, s.prompt, s.completion, s.reserved]),
      [['gpt-4o-2024-08-06', 207, 1000, 10_518]],
    )
    assert.deepEqual(
      d.llm?.map((r) => r.minute.key),
      ['tpm:llm:tokens_per_key_per_model:sk-1|gpt-4o-2024-08-06'],
    )
    // o3-pro (and any model not listed) at 20 / 80: 30000 output tokens reserve 2.40414 USD, over the 2 USD per request.
    const dear = h.run(req('o3-pro', 30_000))
    assert.deepEqual([dear.reason, dear.status], ['cost_per_request_exceeded', 400])
    assert.equal(h.run(req('some-new-model', 30_000)).reason, 'cost_per_request_exceeded')
    assert.equal(h.run(req('gpt-4o-mini', 30_000)).allowed, true, '0.018 USD at gpt-4o-mini prices')
    // 100000 output tokens of gpt-4o reserve 1.00051750 USD → 1000518 micros: 49 fit in 50 USD, warned from 40 USD.
    const big = (): Req => req('gpt-4o', 100_000, 'sk-2')
    const results = Array.from({ length: 50 }, () => h.run(big()))
    assert.equal(results.filter((r) => r.allowed).length, 49)
    assert.deepEqual([results[38]!.warning, results[39]!.warning], [undefined, 'budget_warn'])
    assert.deepEqual([results[49]!.reason, results[49]!.status, results[48]!.limit?.limit], ['budget_exceeded', 403, 50_000_000])
  },
  'llm-anthropic.json': (h) => {
    const req = (body: string): Req => ({ method: 'POST', path: '/v1/messages', headers: { 'x-api-key': 'k' }, body })
    const d = h.run(req(chatBody(1200, { max_tokens: 100_000, stream: true })))
    assert.deepEqual(
      d.llm?.map((r) => [r.prompt, r.reserved, r.streaming]),
      [[300, 300 + 8192, true]],
    )
    assert.equal(allowedInARow(h, req(chatBody(1200, { max_tokens: 8192 }))), 6) // 60000 burst, 8492 already used
    // The SDK with an auth token sends the key as a Bearer token: the same key, the same bucket.
    assert.equal(
      h.run({ method: 'POST', path: '/v1/messages', headers: { authorization: 'Bearer k' }, body: chatBody(40) }).reason,
      'tpm_exceeded',
    )
  },
  'llm-gemini.json': (h) => {
    const req = (body: object, extra: Partial<Req> = {}): Req => ({
      method: 'POST',
      path: '/v1beta/models/gemini-2.5-flash:streamGenerateContent',
      query: 'alt=sse',
      headers: { 'x-goog-api-key': 'AIza-1' },
      body: JSON.stringify(body),
      ...extra,
    })
    const contents = [{ role: 'user', parts: [{ text: 'hello world '.repeat(100) }] }]
    // 1200 characters of contents: 300 tokens; maxOutputTokens 3000 × 2 candidates, capped at 8192.
    const d = h.run(req({ contents, generationConfig: { maxOutputTokens: 3000, candidateCount: 2 } }))
    assert.deepEqual(
      d.llm?.map((r) => [r.prompt, r.reserved]),
      [[300, 300 + 6000]],
    )
    assert.equal(d.limit?.remaining, 60000 - 6300)
    assert.equal(allowedInARow(h, req({ contents, generationConfig: { maxOutputTokens: 8192 } })), 6) // 53700 / 8492
    // The same key in the query string is the same bucket, another key another; two different keys are refused.
    const big = { contents, generationConfig: { maxOutputTokens: 8192 } }
    assert.equal(h.run(req(big, { query: 'key=AIza-1', headers: {} })).reason, 'tpm_exceeded')
    assert.equal(h.run(req(big, { query: 'key=AIza-2', headers: {} })).allowed, true)
    assert.equal(h.run(req({ contents }, { headers: { 'x-goog-api-key': 'AIza-1' }, query: 'key=AIza-2' })).status, 400)
    // Not a POST to a model method: not limited.
    assert.equal(h.run({ method: 'GET', path: '/v1beta/models', headers: { 'x-goog-api-key': 'AIza-1' } }).allowed, true)
  },
  'llm-bedrock.json': (h) => {
    const sig = (akid: string): string =>
      `AWS4-HMAC-SHA256 Credential=${akid}/20260101/us-east-1/bedrock/aws4_request, SignedHeaders=host;x-amz-date, Signature=${'0'.repeat(64)}`
    const req = (body: object, akid = 'AKIAEXAMPLE1'): Req => ({
      method: 'POST',
      path: '/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/converse-stream',
      headers: { authorization: sig(akid) },
      body: JSON.stringify(body),
    })
    const messages = [
      { role: 'user', content: [{ text: 'hello world '.repeat(100) }, { image: { format: 'png', source: { bytes: 'A'.repeat(40000) } } }] },
    ]
    // 300 tokens of text, the image at 1000 (not its 40000 base64 characters), maxTokens capped at 8192.
    const d = h.run(req({ messages, inferenceConfig: { maxTokens: 20000 } }))
    assert.deepEqual(
      d.llm?.map((r) => [r.prompt, r.reserved, r.streaming]),
      [[1300, 1300 + 8192, true]],
    )
    assert.equal(allowedInARow(h, req({ messages, inferenceConfig: { maxTokens: 8192 } })), 5) // 60000 burst, 9492 used
    // Another signature by the same access key id is the same bucket; another key id is not.
    const big = { messages, inferenceConfig: { maxTokens: 8192 } }
    assert.equal(h.run(req(big, 'AKIAEXAMPLE1')).reason, 'tpm_exceeded')
    assert.equal(h.run(req(big, 'AKIAEXAMPLE2')).allowed, true)
  },
  'llm-ollama.json': (h) => {
    const req = (path: string, body: object, peer = '192.0.2.7'): Req => ({ method: 'POST', path, peer, body: JSON.stringify(body) })
    // 100 × "hello world " is 201 o200k tokens + 6 of chat framing; num_predict 6000 capped at 4096.
    const d = h.run(
      req('/api/chat', {
        model: 'llama3.2',
        messages: [{ role: 'user', content: 'hello world '.repeat(100) }],
        options: { num_predict: 6000 },
      }),
    )
    assert.deepEqual(
      d.llm?.map((r) => [r.prompt, r.reserved]),
      [[207, 207 + 4096]],
    )
    // /api/generate: the prompt alone (no framing), the default 512 reserved.
    const g = h.run(req('/api/generate', { model: 'llama3.2', prompt: 'hello world '.repeat(100) }))
    assert.deepEqual(
      g.llm?.map((r) => [r.prompt, r.reserved]),
      [[201, 201 + 512]],
    )
    assert.equal(allowedInARow(h, req('/api/generate', { model: 'llama3.2', prompt: 'hi', options: { num_predict: 4000 } })), 3) // (20000 - 5016) / 4001
    assert.equal(h.run(req('/api/chat', { model: 'llama3.2', messages: [] }, '192.0.2.8')).allowed, true, 'another client address')
  },
  'quickstart.json': (h) => assert.equal(allowedInARow(h, {}), 10),
  'per-user-jwt.json': (h) => {
    assert.equal(allowedInARow(h, { path: '/api/x', jwt: { sub: 'alice' } }), 20)
    assert.equal(h.run({ path: '/api/x', jwt: { sub: 'bob' } }).allowed, true)
    assert.equal(h.run({ path: '/api/x' }).limit?.limit, 100, 'no token: per_user skipped, per_ip applies')
  },
  'per-api-key.json': (h) => {
    assert.equal(allowedInARow(h, { headers: { 'X-API-Key': 'k1' } }), 10)
    assert.equal(h.run({ headers: { x_api_key: 'k1' } }).allowed, true, 'X_Api_Key is another header: no key, the rule is skipped')
    assert.equal(h.run({ headers: { X_Api_Key: 'junk', 'X-API-Key': 'k1' } }).allowed, false, 'the real X-Api-Key beside it is counted')
    assert.equal(h.run({ headers: { 'X-API-Key': ['junk', 'k1'] } }).status, 400, 'a repeated key with two values is refused')
  },
  'per-ip.json': (h) => {
    assert.equal(allowedInARow(h, { peer: '192.0.2.1' }), 5)
    assert.equal(h.run({ peer: '192.0.2.2' }).allowed, true)
  },
  'query-cost.json': (h) => {
    const req = (q: string): Req => ({ path: '/search/books', query: q, headers: { 'x-api-key': 'k' } })
    assert.equal(h.run(req('pages=40')).limit?.remaining, 60)
    assert.equal(h.run(req('pages=zero')).limit?.remaining, 59)
    assert.equal(h.run(req('pages=101')).allowed, false)
  },
  'header-cost.json': (h) => {
    const req = (cost?: string): Req => ({ path: '/v1/x', headers: { 'x-api-key': 'k', ...(cost ? { 'x-request-cost': cost } : {}) } })
    assert.equal(h.run(req('50')).limit?.remaining, 150)
    assert.equal(h.run(req()).limit?.remaining, 148)
  },
  'plan-fallback.json': (h) => {
    assert.equal(h.run({ path: '/api/x', jwt: { sub: 'u', plan: 'pro' } }).limit?.limit, 100)
    assert.equal(h.run({ path: '/api/x', jwt: { sub: 'u', plan: 'enterprise' } }).limit?.limit, 400)
    assert.equal(h.run({ path: '/api/x', jwt: { sub: 'u', plan: 'free' } }).ruleName, 'plan_free')
    assert.equal(h.run({ path: '/api/x' }).limit?.limit, 5)
  },
  'host-scoped.json': (h) => {
    assert.equal(h.run({ host: 'API.Example.com:8443' }).limit?.limit, 20)
    assert.equal(h.run({ host: 'www.example.com' }).reason, 'no_matching_policy')
  },
  'login-exact.json': (h) => {
    assert.equal(allowedInARow(h, { method: 'POST', path: '/login', query: 'next=/home' }), 3)
    assert.equal(h.run({ method: 'GET', path: '/login' }).reason, 'no_matching_policy')
    assert.equal(h.run({ method: 'POST', path: '/login/x' }).reason, 'no_matching_policy')
    assert.equal(h.run({ method: 'POST', path: '/login' }, 5).allowed, true, 'one attempt back after 5 s')
  },
  'shadow-mode.json': (h) => {
    assert.equal(allowedInARow(h, { headers: { 'x-api-key': 'k' } }, 50), 50)
    assert.equal(h.obs.shadow.length, 45)
  },
  'kill-switch.json': (h) => {
    assert.equal(h.run({ path: '/anything', headers: { 'x-tenant': 'acme' } }).reason, 'kill_switch')
    assert.equal(h.run({ path: '/anything', headers: { 'x-tenant': 'other' } }).allowed, true)
  },
  'global-shadow.json': (h) => {
    assert.equal(allowedInARow(h, { jwt: { sub: 'u' } }, 100), 100)
    assert.ok(h.obs.shadow.length > 0)
  },
  'composite-key.json': (h) => {
    const req = (org: string, key: string): Req => ({ path: '/v1/x', jwt: { org_id: org }, headers: { 'x-api-key': key } })
    assert.equal(allowedInARow(h, req('o1', 'k1')), 15)
    assert.equal(h.run(req('o1', 'k2')).allowed, true)
    assert.equal(h.run(req('o2', 'k1')).allowed, true)
    assert.equal(h.run({ path: '/v1/x', jwt: { org_id: 'o1' } }).limit?.limit, 100, 'missing key part: per_org_key skipped, per_ip applies')
  },
  'spend-budget.json': (h) => {
    const req = (cost: string): Req => ({ headers: { 'x-tenant-id': 't1', 'x-request-cost': cost } })
    assert.equal(h.run(req('790')).warning, undefined)
    assert.equal(h.run(req('10')).warning, 'budget_warn')
    assert.deepEqual([h.run(req('150')).warning, h.run(req('0.0001')).delayMs], ['budget_throttle', 500], 'a tiny cost is charged as 1')
    assert.equal(h.run(req('50')).reason, 'budget_exceeded')
    assert.equal(h.run(req('49')).limit?.remaining, 0, '951 + 49 = 1000: the rejected 50 was not charged')
  },
  'monthly-budget.json': (h) => {
    const req = (cost: string): Req => ({ headers: { 'x-tenant-id': 't1', 'x-request-cost': cost } })
    assert.equal(h.run(req('89999')).warning, undefined)
    assert.equal(h.run(req('1000')).warning, 'budget_warn')
    assert.equal(h.run(req('9002')).reason, 'budget_exceeded')
    const last = h.run(req('9001'))
    assert.deepEqual([last.limit?.remaining, last.limit?.resetS], [0, 31 * 86_400], 'spent; January has 31 days to run')
    assert.deepEqual([h.run(req('1'), 31 * 86_400).allowed, h.run(req('1'), 31 * 86_400).limit?.remaining], [true, 99_998], '1 February')
  },
  'sliding-window.json': (h) => {
    const req = (cost = '1'): Req => ({ headers: { 'x-api-key': 'k', 'x-request-cost': cost } })
    assert.equal(h.run(req(), 0).allowed, true)
    assert.equal(allowedInARow(h, { ...req(), headers: { 'x-api-key': 'k' } }, 99), 99)
    assert.equal(h.run(req('5')).reason, 'sliding_window_exceeded')
    assert.equal(h.run(req(), 60.1).reason, 'sliding_window_exceeded', 'the next minute begun: nearly all of the last one still counts')
    assert.deepEqual([h.run(req('25'), 75).allowed, h.run(req(), 75).allowed], [true, false], 'a quarter in: 100 × 3/4 + 25 = 100')
  },
  'loop-detection.json': (h) => {
    const req: Req = { path: '/v1/tools/search', query: 'q=same', headers: { 'x-api-key': 'k' } }
    assert.equal(allowedInARow(h, req), 4)
    assert.equal(h.run(req).reason, 'loop_detected')
    assert.equal(h.run({ ...req, query: 'q=other' }).allowed, true)
  },
  'delay-smoothing.json': (h) => {
    const req: Req = { path: '/v1/batch/x', headers: { 'x-api-key': 'k' } }
    const waits = Array.from({ length: 8 }, () => h.run(req).delayMs ?? 0)
    assert.deepEqual(waits, [0, 200, 400, 600, 800, 1000, 1200, 1400], 'forwarded 200 ms apart')
    assert.equal(allowedInARow(h, req), 3, 'up to 2 s of tokens owed: 3 more, then 429')
    assert.equal(h.run({ ...req, headers: { 'x-api-key': 'other' } }).delayMs, undefined, 'each key has its own bucket')
    const exports: Req = { path: '/v1/exports/x', headers: { 'x-api-key': 'k' } }
    const held = Array.from({ length: 9 }, () => h.run(exports).delayMs ?? 0)
    assert.deepEqual(held, [0, 0, 0, 0, 0, 1200, 1400, 1600, 1800], 'the sliding window: 5 now, then as the first second leaves the window')
    assert.equal(h.run(exports).reason, 'sliding_window_exceeded', 'the 10th would fit only at the end of the next window')
  },
  'status-counting.json': (h) => {
    const login: Req = { method: 'POST', path: '/login' }
    const d = h.run(login)
    assert.deepEqual(
      d.statusCharges?.map((c) => [c.ruleName, c.rule.kind, c.rule.matches(401), c.rule.matches(200)]),
      [['failed_logins', 'count', true, false]],
    )
    assert.equal(allowedInARow(h, login), 4, 'charged until the answer says otherwise: 5 in flight at most')
    const api = h.run({ path: '/api/x', headers: { 'x-api-key': 'k' } })
    assert.deepEqual(
      api.statusCharges?.map((c) => [c.ruleName, c.rule.kind, c.rule.matches(503), c.rule.matches(404)]),
      [['api_calls', 'refund', true, false]],
    )
  },
  'circuit-breaker.json': (h) => {
    const req = (tenant: string, cost = '1000'): Req => ({
      path: '/v1/generate/x',
      headers: { 'x-tenant-id': tenant, 'x-request-cost': cost },
    })
    assert.equal(
      h.run(req('a', '1001')).reason,
      'token_bucket_exceeded',
      "a cost past the burst is the rule's reject and never reaches the breaker",
    )
    const tenants = Array.from({ length: 19 }, (_, i) => `t${i}`)
    assert.deepEqual(
      tenants.map((t) => h.run(req(t)).allowed),
      tenants.map(() => true),
      'no one request, and no one tenant, opens it',
    )
    assert.equal(h.run(req('t19')).reason, 'circuit_breaker_open', 'the 20th 1000 brings the spend to 20000 per minute')
    assert.equal(h.run(req('u'), 299).reason, 'circuit_breaker_open')
    assert.equal(h.run(req('u'), 301).allowed, true)
  },
  // The harness forwards nothing, so no exchange ends: every allowed request keeps its slots.
  'concurrency.json': (h) => {
    const key = (k: string): Req => ({ method: 'POST', path: '/v1/chat/completions', headers: { authorization: `Bearer ${k}` } })
    assert.equal(allowedInARow(h, key('sk-a')), 4)
    const d = h.run(key('sk-a'))
    assert.deepEqual([d.reason, d.limit?.limit, d.limit?.remaining], ['concurrency_exceeded', 4, 0])
    let inFlight = 4
    for (let i = 0; inFlight < 64; i++) inFlight += allowedInARow(h, key(`sk-${i}`))
    assert.equal(inFlight, 64)
    assert.equal(h.run(key('sk-new')).reason, 'concurrency_exceeded', 'every key together holds 64')
    assert.equal(h.run({ path: '/health' }).reason, 'no_matching_policy')
  },
}

for (const name of FILES) {
  const check = BEHAVIOUR[name]
  if (check) test(`policies/${name} behaves as its comment says`, () => check(new Harness(load(name))))
}

test('every example bundle has a behaviour check', () => {
  assert.deepEqual(
    FILES.filter((n) => !(n in BEHAVIOUR)),
    [],
  )
})
