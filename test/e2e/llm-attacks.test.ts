/**
 * Clients trying to buy LLM capacity through the real gateway process, each
 * shown failing (docs/behaviour.md §5): prompt text moved to fields other
 * than `messages` (system, prompt, input, tools, images) still counts, the
 * largest completion field is reserved, a truthy non-boolean `stream` is cut
 * like `true`, a chunked body past the first MiB cannot pass
 * max_prompt_tokens, an absurd reported usage is charged at most the burst /
 * tokens_per_day, and the shipped bundles limit the keys the official SDKs
 * send without printing them at LOG_LEVEL=debug.
 */
import assert from 'node:assert/strict'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { startBackend, startGateway, type Backend, type GatewayProcess } from '../helpers/processes.js'

const TEXT = 'abcdefghij'.repeat(4) // 40 characters: 10 completion tokens
const BIG = 'lorem ipsum '.repeat(7000) // 84 KB: ~21,000 simple_word tokens

/** Bytes each request brought, and SSE content events written, by path. */
interface Upstream extends Backend {
  received: Map<string, number>
}

/** A lax upstream (as pydantic-based servers are): `"stream"` truthy in any form streams. */
function answer(req: IncomingMessage, res: ServerResponse, body: Buffer, received: Map<string, number>): void {
  received.set(req.url!, body.length)
  let json: Record<string, unknown> = {}
  try {
    json = JSON.parse(body.toString('utf8')) as Record<string, unknown>
  } catch {
    // an upload: answered without usage
  }
  const p = req.headers['x-fake-prompt']
  const usage = p === undefined ? undefined : { prompt_tokens: Number(p), completion_tokens: 1, total_tokens: Number(p) + 1 }
  const s = json.stream
  if (s === undefined || s === false || s === 'false' || s === 0) {
    res.writeHead(200, { 'content-type': 'application/json' })
    return void res.end(
      JSON.stringify({
        id: 'c1',
        object: 'chat.completion',
        choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, finish_reason: 'stop' }],
        ...(usage ? { usage } : {}),
      }),
    )
  }
  res.writeHead(200, { 'content-type': 'text/event-stream' })
  let i = 0
  const next = (): void => {
    if (res.destroyed) return
    if (i === 10) return void res.end('data: [DONE]\n\n')
    i++
    res.write(
      `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content: TEXT } }] })}\n\n`,
    )
    setTimeout(next, 2)
  }
  next()
}

async function startUpstream(): Promise<Upstream> {
  const received = new Map<string, number>()
  const b = await startBackend((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => answer(req, res, Buffer.concat(chunks), received))
  })
  return Object.assign(b, { received })
}

const llm = (name: string, config: object): object => ({
  name,
  limit_keys: ['header:x-tenant'],
  algorithm: 'token_bucket_llm',
  algorithm_config: { tokens_per_minute: 600, burst_tokens: 100000, ...config },
})
const policy = (id: string, rule: object): object => ({ id, spec: { selector: { pathPrefix: `/${id}/` }, rules: [rule] } })

function writeBundle(dir: string): string {
  const file = join(dir, 'bundle.json')
  writeFileSync(
    file,
    JSON.stringify({
      bundle_version: 1,
      policies: [
        policy('sw', llm('sw', { max_prompt_tokens: 1000 })),
        policy('tk', llm('tk', { max_prompt_tokens: 1000, token_source: { estimator: 'tokenizer' } })),
        policy('prec', llm('prec', { max_completion_tokens: 2000 })),
        policy('str', llm('str', { max_completion_tokens: 50, streaming: { buffer_tokens: 10 } })),
        // Charged at most its burst, a bucket is in debt by at most one minute of refill.
        policy('cap', llm('cap', { tokens_per_minute: 6000, burst_tokens: 6000 })),
        // A minute bucket that refills at once, so the day counter is what rejects.
        policy('day', llm('day', { tokens_per_minute: 1e9, burst_tokens: 1e9, tokens_per_day: 5000 })),
        policy('chunk', llm('chunk', { max_prompt_tokens: 1_000_000, burst_tokens: 1e9 })),
      ],
    }),
  )
  return file
}

interface Answer {
  status: number
  headers: Headers
  text: string
}

async function post(gw: GatewayProcess, path: string, body: object, headers: Record<string, string> = {}): Promise<Answer> {
  const r = await fetch(`${gw.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-tenant': 't', ...headers },
    body: JSON.stringify(body),
  })
  return { status: r.status, headers: r.headers, text: await r.text() }
}

/** POSTs `total` bytes of `fill` chunked (no Content-Length), stopping once an answer arrives; resolves with the answer. */
function chunkedUpload(gw: GatewayProcess, path: string, head: string, total: number): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    let answered = false
    const req = httpRequest(
      `${gw.url}${path}`,
      { method: 'POST', agent: false, headers: { 'x-tenant': 't', 'content-type': 'application/json', 'transfer-encoding': 'chunked' } },
      (res) => {
        answered = true
        let b = ''
        res.on('data', (c: Buffer) => (b += c.toString()))
        res.on('end', () => resolve({ status: res.statusCode!, body: b }))
      },
    )
    req.on('error', (e) => (answered ? undefined : reject(e)))
    const chunk = Buffer.alloc(64 * 1024, 0x61)
    let sent = 0
    const go = (): void => {
      if (sent === 0) {
        req.write(head)
        sent = head.length
      }
      while (sent < total && !answered) {
        const c = total - sent < chunk.length ? chunk.subarray(0, total - sent) : chunk
        sent += c.length
        if (!req.write(c)) return void req.once('drain', go)
      }
      req.end()
    }
    go()
  })
}

describe('LLM capacity cannot be bought with the request body or the reply', { timeout: 300_000 }, () => {
  let up: Upstream
  let gw: GatewayProcess

  before(async () => {
    up = await startUpstream()
    const dir = mkdtempSync(join(tmpdir(), 'fv-llm-attacks-'))
    gw = await startGateway({ FAIRVISOR_BACKEND_URL: up.url, FAIRVISOR_CONFIG_FILE: writeBundle(dir) }, { timeoutMs: 30_000 })
  })

  after(async () => {
    const code = await gw?.stop()
    await up?.close()
    assert.equal(code, 0)
  })

  const tiny = [{ role: 'user', content: 'hi' }]
  const carriers: Record<string, object> = {
    'system string': { messages: tiny, system: BIG },
    'system blocks': { messages: tiny, system: [{ type: 'text', text: BIG }] },
    'text parts': { messages: [{ role: 'user', content: [{ type: 'text', text: BIG }] }] },
    'prompt string': { prompt: BIG },
    'prompt array': { prompt: [BIG.slice(0, 42000), BIG.slice(42000)] },
    'input string (Responses)': { input: BIG },
    'input items (Responses)': { input: [{ role: 'user', content: [{ type: 'input_text', text: BIG }] }] },
    tools: { messages: tiny, tools: [{ type: 'function', function: { name: 'f', description: BIG, parameters: { type: 'object' } } }] },
    functions: { messages: tiny, functions: [{ name: 'f', description: BIG }] },
    'two images (1,000 tokens each)': {
      messages: [
        {
          role: 'user',
          content: [
            { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } },
            { type: 'image', source: { type: 'base64', data: 'AAAA' } },
          ],
        },
      ],
    },
  }

  for (const estimator of ['sw', 'tk']) {
    test(`${estimator === 'sw' ? 'simple_word' : 'tokenizer'}: a prompt over max_prompt_tokens is rejected in whichever field it travels`, async () => {
      for (const [what, body] of Object.entries(carriers)) {
        const r = await post(gw, `/${estimator}/v1/chat/completions`, { model: 'm', max_tokens: 10, ...body })
        assert.equal(r.status, 400, `${what}: ${r.text}`)
        assert.match(r.text, /prompt_tokens_exceeded|prompt/, what)
      }
      const ok = await post(gw, `/${estimator}/v1/chat/completions`, {
        model: 'm',
        max_tokens: 10,
        system: 'be brief',
        messages: tiny,
        tools: [{ type: 'function', function: { name: 'f' } }],
      })
      assert.equal(ok.status, 200, 'a small prompt with every field still passes')
    })
  }

  test('the reservation is the largest completion field, capped by the rule', async () => {
    const r = await post(
      gw,
      '/prec/v1/chat/completions',
      { model: 'm', messages: tiny, max_tokens: 1, max_completion_tokens: 100000 },
      { 'x-tenant': 'prec' },
    )
    assert.equal(r.status, 200)
    // 100000 burst − (1 prompt token + 2000 capped completion); a reservation of 1 would leave 99998.
    const remaining = Number(r.headers.get('ratelimit-remaining'))
    assert.ok(remaining <= 100000 - 2001 && remaining >= 100000 - 2010, `RateLimit-Remaining ${remaining}`)
  })

  for (const stream of ['true', 1, 'yes']) {
    test(`"stream": ${JSON.stringify(stream)} is metered and cut at max_completion_tokens like true`, async () => {
      const r = await post(gw, '/str/v1/chat/completions', { model: 'm', messages: tiny, max_tokens: 500, stream })
      assert.equal(r.status, 200)
      const events = r.text.split(TEXT).length - 1
      // 10 events of 10 tokens; cut after the event that passes 50 (checked every 10 tokens).
      assert.ok(events >= 5 && events <= 6, `${events} content events reached the client: ${r.text.slice(-300)}`)
      assert.ok(!r.text.includes('[DONE]') || events < 10)
    })
  }

  test('reported usage of 1e15 charges at most the burst: the key is usable again within seconds', { timeout: 180_000 }, async () => {
    const first = await post(
      gw,
      '/cap/v1/chat/completions',
      { model: 'm', messages: tiny, max_tokens: 10 },
      { 'x-tenant': 'cap', 'x-fake-prompt': '1e15' },
    )
    assert.equal(first.status, 200)
    const line = await gw.waitForLog((l) => l.event === 'llm_overrun_capped' && l.policy === 'cap')
    assert.equal(line.reported_tokens, 1e15 + 1)
    assert.equal(line.minute_charge, 6000)
    // Charged 6,000 (the burst) past its reservation, the bucket is a few tokens in debt at 100 tokens/s:
    // Retry-After is seconds (at most a minute, jittered up), not 317 years.
    const rejected = await post(gw, '/cap/v1/chat/completions', { model: 'm', messages: tiny, max_tokens: 10 }, { 'x-tenant': 'cap' })
    assert.equal(rejected.status, 429)
    const retry = Number(rejected.headers.get('retry-after'))
    assert.ok(retry >= 1 && retry <= 90, `Retry-After ${retry}`)
    // Waiting what Retry-After said makes the key usable again.
    await new Promise((res) => setTimeout(res, retry * 1000))
    const again = await post(gw, '/cap/v1/chat/completions', { model: 'm', messages: tiny, max_tokens: 10 }, { 'x-tenant': 'cap' })
    assert.equal(again.status, 200, 'the key is usable again after Retry-After')
  })

  test('reported usage of 1e15 charges the day counter at most tokens_per_day (Retry-After: the next UTC midnight)', async () => {
    const first = await post(
      gw,
      '/day/v1/chat/completions',
      { model: 'm', messages: tiny, max_tokens: 10 },
      { 'x-tenant': 'day', 'x-fake-prompt': '1e15' },
    )
    assert.equal(first.status, 200)
    const line = await gw.waitForLog((l) => l.event === 'llm_overrun_capped' && l.policy === 'day')
    assert.equal(line.day_charge, 5000)
    const r = await post(gw, '/day/v1/chat/completions', { model: 'm', messages: tiny, max_tokens: 10 }, { 'x-tenant': 'day' })
    const toMidnight = Math.ceil(86_400 - ((Date.now() / 1000) % 86_400))
    // Past FAIRVISOR_LLM_MAX_RETRY_AFTER (60 s) the reject is a 403 no client retries.
    assert.equal(r.status, toMidnight > 62 ? 403 : 429)
    assert.match(r.text, /per day/)
    const retry = Number(r.headers.get('retry-after'))
    // The next UTC midnight, jittered upwards by at most a minute; 1e15 on the counter gave 1.4e13 s.
    assert.ok(retry >= toMidnight - 2 && retry <= toMidnight + 62, `Retry-After ${retry}, midnight in ${toMidnight}`)
  })

  test('a chunked body past the first MiB is counted as it comes: over max_prompt_tokens it is rejected before the upstream sees a byte', async () => {
    // 8 MB without Content-Length: ~2 M tokens at 4 bytes a token, over 1 M. (Estimated at 262,144 if only the first MiB counted.)
    const r = await chunkedUpload(gw, '/chunk/v1/chat/completions', '{"model":"m","prompt":"', 8 * 1024 * 1024)
    assert.equal(r.status, 400, r.body)
    assert.match(r.body, /prompt_tokens_exceeded|prompt/)
    assert.equal(up.received.has('/chunk/v1/chat/completions'), false, 'nothing was forwarded')
    // 2 MB chunked JSON (~500 k tokens) is read whole, estimated whole and forwarded whole.
    const body = JSON.stringify({ model: 'm', prompt: 'a'.repeat(2 * 1024 * 1024) })
    const ok = await chunkedUpload(gw, '/chunk/v1/completions', body, body.length)
    assert.equal(ok.status, 200, ok.body)
    assert.equal(up.received.get('/chunk/v1/completions'), body.length)
  })
})

describe('the shipped LLM bundles limit the keys the official SDKs send, and never log them', { timeout: 120_000 }, () => {
  let up: Upstream

  before(async () => {
    up = await startUpstream()
  })
  after(async () => {
    await up?.close()
  })

  /** Requests until the first reject; each reserves `maxTokens` (the bundle's cap) plus a tiny prompt. */
  async function allowedInARow(gw: GatewayProcess, path: string, headers: Record<string, string>, maxTokens: number): Promise<number> {
    for (let n = 0; n < 50; n++) {
      const r = await post(gw, path, { model: 'm', messages: [{ role: 'user', content: 'hi' }], max_tokens: maxTokens }, headers)
      if (r.status === 429) return n
      assert.equal(r.status, 200, r.text)
    }
    return 50
  }

  test("policies/llm-openai.json: Authorization: Bearer sk-… (openai SDK) and api-key (Azure) share the key's bucket; debug logs show a hash", async () => {
    const secret = `sk-proj-${process.pid}secretvalue`
    const gw = await startGateway({
      FAIRVISOR_BACKEND_URL: up.url,
      FAIRVISOR_CONFIG_FILE: 'policies/llm-openai.json',
      FAIRVISOR_LOG_LEVEL: 'debug',
    })
    try {
      // 30,000 tokens a minute, 4,096 + ~9 reserved per call: 7 pass.
      assert.equal(
        await allowedInARow(gw, '/v1/chat/completions', { authorization: `Bearer ${secret}`, 'x-stainless-lang': 'js' }, 4096),
        7,
      )
      const azure = await post(
        gw,
        '/v1/chat/completions',
        { model: 'm', messages: [{ role: 'user', content: 'hi' }], max_tokens: 4096 },
        { 'api-key': secret },
      )
      assert.equal(azure.status, 429, 'the same key in api-key is the same bucket')
      const other = await post(
        gw,
        '/v1/chat/completions',
        { model: 'm', messages: [{ role: 'user', content: 'hi' }], max_tokens: 10 },
        { authorization: 'Bearer sk-other' },
      )
      assert.equal(other.status, 200, 'another key has its own bucket')
      const decision = await gw.waitForLog((l) => l.event === 'decision' && l.outcome === 'reject')
      assert.match(String(decision.key), /sha256:[0-9a-f]{12}/)
    } finally {
      await gw.stop()
    }
    const leaked = [...gw.logs.map((l) => JSON.stringify(l)), ...gw.stderr].filter((l) => l.includes(secret) || l.includes('sk-other'))
    assert.deepEqual(leaked, [], 'no log line holds an API key')
  })

  test('policies/llm-anthropic.json: x-api-key and the auth-token form (Authorization: Bearer) are both limited', async () => {
    const gw = await startGateway({ FAIRVISOR_BACKEND_URL: up.url, FAIRVISOR_CONFIG_FILE: 'policies/llm-anthropic.json' })
    try {
      // 60,000 burst, 8,192 + 1 reserved per call: 7 pass.
      assert.equal(await allowedInARow(gw, '/v1/messages', { 'x-api-key': 'sk-ant-api03-a', 'anthropic-version': '2023-06-01' }, 8192), 7)
      assert.equal(
        await allowedInARow(gw, '/v1/messages', { authorization: 'Bearer sk-ant-oat-b', 'anthropic-version': '2023-06-01' }, 8192),
        7,
      )
    } finally {
      assert.equal(await gw.stop(), 0)
    }
  })
})
