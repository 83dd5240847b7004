/**
 * Budgets in money end to end (docs/llm.md "Budgets in money"): the real gateway process, on the
 * in-process store and on Redis (127.0.0.1:6379, rule names unique per run), in front of an
 * upstream answering in OpenAI's recorded shapes (test/fixtures/llm/chat.json, chat-stream.sse)
 * with the usage each test chooses. The spend expected is computed here from the price table and
 * the usage the upstream returns, in integer micros: a budget rejects at the call that spend says,
 * a per-request cap refuses an over-priced call before the upstream sees it, a stream settles on
 * its final usage chunk, and the model priced is the one the upstream runs (the body it is
 * forwarded, the Azure deployment of the path), a body naming two models being refused.
 */
import assert from 'node:assert/strict'
import { mkdtempSync, writeFileSync } from 'node:fs'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { startBackend, startGateway, metricValue, type Backend, type GatewayProcess } from '../helpers/processes.js'
import { fixture } from '../helpers/replay-llm.js'
import { waitFor } from '../helpers/wait.js'

const RUN = `${process.pid}_${Date.now()}`

/** USD per million tokens, as the bundle states them. */
const PRICES: Record<string, { input: number; cached_input?: number; output: number }> = {
  'gpt-4o*': { input: 2.5, cached_input: 1.25, output: 10 },
  'gpt-4o-mini*': { input: 0.15, cached_input: 0.075, output: 0.6 },
  default: { input: 15, output: 60 },
}

/** The test's own price lookup: exact, longest prefix, default; names lower-cased. */
function priceOf(model: string): { input: number; cached: number; output: number } {
  const m = model.toLowerCase()
  let best: string | undefined
  for (const k of Object.keys(PRICES))
    if (k.endsWith('*') && m.startsWith(k.slice(0, -1)) && (best === undefined || k.length > best.length)) best = k
  const p = PRICES[m] ?? PRICES[best ?? 'default']!
  return { input: p.input, cached: p.cached_input ?? p.input, output: p.output }
}

interface Usage {
  prompt: number
  cached: number
  completion: number
}

/** What `u` costs on `model`, in micros: Σ tokens × (USD per million × 1e6) / 1e6, rounded up once. */
function costMicros(model: string, u: Usage): number {
  const p = priceOf(model)
  const micros = (usd: number): bigint => BigInt(Math.round(usd * 1e6))
  const sum = BigInt(u.prompt - u.cached) * micros(p.input) + BigInt(u.cached) * micros(p.cached) + BigInt(u.completion) * micros(p.output)
  return Number((sum + 999_999n) / 1_000_000n)
}

// ---- the upstream: OpenAI's recorded shapes, the model it runs echoed, the usage the test asks for (x-usage: prompt,cached,completion)

interface Upstream extends Backend {
  /** The model each call ran on, as the upstream read it. */
  models: string[]
}

function usageJson(u: Usage): object {
  return {
    prompt_tokens: u.prompt,
    completion_tokens: u.completion,
    total_tokens: u.prompt + u.completion,
    prompt_tokens_details: { cached_tokens: u.cached, audio_tokens: 0 },
    completion_tokens_details: { reasoning_tokens: 0, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 },
  }
}

function answer(models: string[], req: IncomingMessage, res: ServerResponse, raw: string): void {
  const body = JSON.parse(raw) as { model: string; stream?: boolean; stream_options?: { include_usage?: boolean } }
  // Azure runs the deployment of the path whatever the body says; OpenAI the body's model (JSON.parse: the last of two).
  const model = /^\/openai\/deployments\/([^/]+)\//.exec(req.url ?? '')?.[1] ?? body.model
  models.push(model)
  const [prompt, cached, completion] = String(req.headers['x-usage']).split(',').map(Number) as [number, number, number]
  const usage = usageJson({ prompt, cached, completion })
  if (body.stream !== true) {
    const doc = JSON.parse(fixture('chat.json')) as Record<string, unknown>
    res.writeHead(200, { 'content-type': 'application/json' })
    return void res.end(JSON.stringify({ ...doc, model, usage }))
  }
  const events = fixture('chat-stream.sse')
    .split('\n\n')
    .filter((e) => e.startsWith('data: '))
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8' })
  for (const e of events) {
    if (e === 'data: [DONE]') break
    const chunk = JSON.parse(e.slice(6)) as { choices: unknown[]; usage: unknown }
    if (chunk.choices.length === 0) {
      if (body.stream_options?.include_usage === true) res.write(`data: ${JSON.stringify({ ...chunk, model, usage })}\n\n`)
    } else res.write(`data: ${JSON.stringify({ ...chunk, model })}\n\n`)
  }
  res.end('data: [DONE]\n\n')
}

async function startUpstream(): Promise<Upstream> {
  const models: string[] = []
  const b = await startBackend((req, res) => {
    let raw = ''
    req.setEncoding('utf8')
    req.on('data', (c: string) => (raw += c))
    req.on('end', () => answer(models, req, res, raw))
  })
  return Object.assign(b, { models })
}

// ---- the bundle

const B_MICROS = 50_000 // 0.05 USD a day

function usd(name: string, budget: number, extra: object = {}): object {
  return {
    name: `${name}_${RUN}`,
    limit_keys: ['llm:api_key'],
    algorithm: 'cost_based',
    algorithm_config: {
      budget,
      period: '1d',
      cost_key: 'llm_price',
      staged_actions: [
        { threshold_percent: 80, action: 'warn' },
        { threshold_percent: 100, action: 'reject' },
      ],
      ...extra,
    },
  }
}

function writeBundle(): string {
  const p = (id: string, prefix: string, rule: object): object => ({
    id,
    spec: { selector: { pathPrefix: prefix }, mode: 'enforce', rules: [rule] },
  })
  const file = join(mkdtempSync(join(tmpdir(), 'fv-spend-')), 'bundle.json')
  writeFileSync(
    file,
    JSON.stringify({
      bundle_version: 1,
      llm_prices: { currency: 'USD', per_million_tokens: PRICES },
      policies: [
        p('b', '/b/', usd('b', B_MICROS / 1e6)),
        p('cap', '/cap/', usd('cap', 50, { max_cost_per_request: 0.01 })),
        p('s', '/s/', usd('s', 50)),
        p('m', '/m/', usd('m', 50)),
        p('az', '/openai/', usd('az', 50)),
      ],
    }),
  )
  return file
}

// ---- calls

const PROMPT = [{ role: 'user', content: 'x'.repeat(400) }] // simple_word: 100 tokens
const PROMPT_TOKENS = 100

interface Answer {
  status: number
  headers: Headers
  text: string
}

async function call(gw: GatewayProcess, path: string, body: string | object, usage: Usage, key = 'sk-test'): Promise<Answer> {
  const r = await fetch(`${gw.url}${path}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      authorization: `Bearer ${key}`,
      'x-usage': `${usage.prompt},${usage.cached},${usage.completion}`,
    },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  })
  return { status: r.status, headers: r.headers, text: await r.text() }
}

const chat = (model: string, maxTokens: number, extra: object = {}): object => ({
  model,
  messages: PROMPT,
  max_tokens: maxTokens,
  ...extra,
})

for (const store of ['memory', 'redis://127.0.0.1:6379']) {
  describe(`budgets in money through the gateway (${store.startsWith('redis') ? 'redis' : 'memory'})`, { timeout: 180_000 }, () => {
    let up: Upstream
    let gw: GatewayProcess
    /** Settlements on reported usage so far: each test waits for its own before reading the spend. */
    let onUsage = 0

    const settled = async (more: number): Promise<void> => {
      onUsage += more
      await waitFor(
        async () => ((await metricValue(gw, 'fairvisor_llm_spend_settlements_total', 'by="usage"')) ?? 0) >= onUsage,
        `${onUsage} money settlements on usage`,
      )
    }
    const spent = async (policy: string): Promise<number> =>
      (await metricValue(gw, 'fairvisor_llm_spend_micros_total', `policy="${policy}",currency="USD"`)) ?? 0

    before(async () => {
      up = await startUpstream()
      gw = await startGateway({
        FAIRVISOR_BACKEND_URL: up.url,
        FAIRVISOR_CONFIG_FILE: writeBundle(),
        FAIRVISOR_STORE: store,
        FAIRVISOR_REDIS_TIMEOUT_MS: '2000',
      })
    })

    after(async () => {
      const code = await gw?.stop()
      await up?.close()
      assert.equal(code, 0)
    })

    test('a $ budget rejects at the call where the settled spend leaves no room for its reservation', async () => {
      const usage: Usage = { prompt: 1000, cached: 512, completion: 300 }
      const perCall = costMicros('gpt-4o', usage) // 488 × 2.5 + 512 × 1.25 + 300 × 10 = 4860
      const reserved = costMicros('gpt-4o', { prompt: PROMPT_TOKENS, cached: 0, completion: 100 }) // 250 + 1000
      let spentSoFar = 0
      let calls = 0
      for (;;) {
        const r = await call(gw, '/b/v1/chat/completions', chat('gpt-4o', 100), usage)
        calls++
        const fits = spentSoFar + reserved <= B_MICROS
        if (!fits) {
          // The budget resets at the end of the day, past FAIRVISOR_LLM_MAX_RETRY_AFTER: a 403 no client retries.
          assert.equal(r.status, 403, `call ${calls}: ${spentSoFar} + ${reserved} micros is over ${B_MICROS}`)
          assert.equal(r.headers.get('x-fairvisor-reason'), 'budget_exceeded')
          assert.equal(r.headers.get('x-should-retry'), 'false')
          assert.ok(Number(r.headers.get('retry-after')) > 60)
          assert.match((JSON.parse(r.text) as { error: { message: string } }).error.message, /budget in money\. It resets in \d+ s/)
          break
        }
        assert.equal(r.status, 200, `call ${calls}: ${spentSoFar} + ${reserved} micros fits ${B_MICROS}`)
        assert.equal(Number(r.headers.get('ratelimit-remaining')), B_MICROS - spentSoFar - reserved, `call ${calls}: RateLimit-Remaining`)
        assert.equal(r.headers.get('x-fairvisor-warning'), spentSoFar + reserved >= 0.8 * B_MICROS ? 'budget_warn' : null)
        spentSoFar += perCall
        await settled(1)
        assert.equal(await spent('b'), spentSoFar)
        assert.ok(calls < 100, 'the budget must end')
      }
      assert.equal(calls, 12, '11 calls of 4860 micros fit 0.05 USD on a reservation of 1250 each; the 12th does not')
      assert.equal(up.count, 11)
    })

    test('a per-request cap refuses an over-priced call before the upstream sees it; a cheaper one passes', async () => {
      const before = up.count
      const usage: Usage = { prompt: 100, cached: 0, completion: 10 }
      // gpt-4o: 100 × 2.5 + 2000 × 10 = 20250 micros > 0.01 USD; a model not listed (15 / 60): 100 × 15 + 200 × 60 = 13500.
      for (const [model, maxTokens] of [
        ['gpt-4o', 2000],
        ['o1', 200],
      ] as const) {
        const r = await call(gw, '/cap/v1/chat/completions', chat(model, maxTokens), usage)
        assert.equal(r.status, 400, model)
        assert.equal(r.headers.get('x-fairvisor-reason'), 'cost_per_request_exceeded')
        assert.equal(r.headers.get('x-should-retry'), 'false')
        assert.equal(r.headers.get('retry-after'), null)
        const body = JSON.parse(r.text) as { error: { type: string; code: string; message: string } }
        assert.deepEqual([body.error.type, body.error.code], ['invalid_request_error', 'cost_per_request_exceeded'])
        assert.match(body.error.message, /exceeds the cost allowed per request/)
      }
      assert.equal(up.count, before, 'the upstream saw neither')
      // 250 + 900 × 10 = 9250 micros and 1500 + 100 × 60 = 7500: under the cap.
      assert.equal((await call(gw, '/cap/v1/chat/completions', chat('gpt-4o', 900), usage)).status, 200)
      assert.equal((await call(gw, '/cap/v1/chat/completions', chat('o1', 100), usage)).status, 200)
      await settled(2)
      assert.equal(await spent('cap'), costMicros('gpt-4o', usage) + costMicros('o1', usage))
    })

    test('a stream settles on the usage of its last chunk (include_usage), cached tokens at their price', async () => {
      const usage: Usage = { prompt: 2048, cached: 1024, completion: 181 }
      const r = await call(
        gw,
        '/s/v1/chat/completions',
        chat('gpt-4o-mini', 500, { stream: true, stream_options: { include_usage: true } }),
        usage,
      )
      assert.equal(r.status, 200)
      assert.match(r.text, /"prompt_tokens":2048[\s\S]*data: \[DONE\]/)
      await settled(1)
      assert.equal(await spent('s'), costMicros('gpt-4o-mini', usage)) // 1024 × 0.15 + 1024 × 0.075 + 181 × 0.6 → 339 micros
      const next = await call(gw, '/s/v1/chat/completions', chat('gpt-4o-mini', 100), { prompt: 1, cached: 0, completion: 1 })
      const reserved = costMicros('gpt-4o-mini', { prompt: PROMPT_TOKENS, cached: 0, completion: 100 })
      assert.equal(Number(next.headers.get('ratelimit-remaining')), 50_000_000 - costMicros('gpt-4o-mini', usage) - reserved)
      await settled(1)
    })

    test('the model priced is the model the upstream runs: the forwarded body, the Azure deployment; two models refused', async () => {
      const usage: Usage = { prompt: 1000, cached: 0, completion: 1000 }
      const seen = up.models.length
      const bodies = [
        JSON.stringify(chat('gpt-4o-mini', 100)),
        JSON.stringify(chat('GPT-4o', 100)),
        '{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"model":"gpt-4o"}',
      ]
      for (const b of bodies) assert.equal((await call(gw, '/m/v1/chat/completions', b, usage)).status, 200)
      const azure = await call(gw, '/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21', chat('gpt-4o-mini', 100), usage)
      assert.equal(azure.status, 200)
      // A cheap model for the gateway beside an expensive one for the upstream, plainly or spelled with escapes.
      for (const b of [
        '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"model":"o1-pro"}',
        '{"model":"gpt-4o-mini","messages":[],"mod\\u0065l":"o1-pro"}',
      ]) {
        const r = await call(gw, '/m/v1/chat/completions', b, usage)
        assert.equal(r.status, 400, b)
        assert.equal(r.headers.get('x-fairvisor-reason'), 'ambiguous_request')
      }
      const models = up.models.slice(seen)
      assert.deepEqual(models, ['gpt-4o-mini', 'GPT-4o', 'gpt-4o', 'gpt-4o'], 'the two ambiguous bodies never reached it')
      await settled(4)
      assert.equal(
        await spent('m'),
        models.slice(0, 3).reduce((sum, m) => sum + costMicros(m, usage), 0),
      )
      assert.equal(await spent('az'), costMicros('gpt-4o', usage), 'the deployment is priced, not the body’s gpt-4o-mini')
      assert.notEqual(costMicros('gpt-4o', usage), costMicros('gpt-4o-mini', usage))
    })
  })
}
