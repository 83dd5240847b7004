/**
 * token_bucket_llm end to end (docs/behaviour.md §5): the real gateway process in front of
 * a fake LLM backend, on the memory store and on Redis (127.0.0.1:6379, rule
 * names unique per run). Reservations are settled against the usage the
 * backend reports (a refund and an overrun both show in the next request's
 * RateLimit-Remaining; the minute bucket refills 1 token/s), the day counter
 * rejects with Retry-After at the next UTC midnight, streams are cut at
 * max_completion_tokens (graceful_close, error_chunk; shadow only logs), and
 * a 50 MB upload streams through an LLM rule (the gateway holds its first MiB).
 */
import assert from 'node:assert/strict'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { request as httpRequest } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { startFakeLlm, type FakeLlm } from '../helpers/fake-llm.js'
import { metricSum, startGateway, type GatewayProcess } from '../helpers/processes.js'
import { waitFor } from '../helpers/wait.js'

const RUN = `${process.pid}_${Date.now()}`
const PROMPT = [{ role: 'user', content: 'x'.repeat(400) }] // simple_word: 100 tokens
const MIB = 1024 * 1024

function llmRule(name: string, extra: object = {}): object {
  return {
    name: `${name}_${RUN}`,
    limit_keys: ['header:x-tenant'],
    algorithm: 'token_bucket_llm',
    algorithm_config: { tokens_per_minute: 60, burst_tokens: 10000, ...extra },
  }
}

function writeBundle(dir: string): string {
  const cut = { max_completion_tokens: 50, streaming: { buffer_tokens: 10 } }
  const p = (id: string, rule: object, mode = 'enforce'): object => ({
    id,
    spec: { selector: { pathPrefix: `/${id}/` }, mode, rules: [rule] },
  })
  const file = join(dir, 'bundle.json')
  writeFileSync(
    file,
    JSON.stringify({
      bundle_version: 1,
      policies: [
        p('a', llmRule('a', { tokens_per_day: 1_000_000 })),
        p('day', llmRule('day', { tokens_per_day: 1500 })),
        p('gc', llmRule('gc', cut)),
        p('ec', llmRule('ec', { ...cut, streaming: { buffer_tokens: 10, on_limit_exceeded: 'error_chunk' } })),
        p('sh', llmRule('sh', cut), 'shadow'),
        p('up', llmRule('up', { burst_tokens: 1e9 })),
      ],
    }),
  )
  return file
}

interface Answer {
  status: number
  remaining: number
  headers: Headers
  text: string
}

async function call(
  gw: GatewayProcess,
  path: string,
  tenant: string,
  o: { usage?: [number, number]; stream?: boolean; chunks?: number; maxTokens?: number; includeUsage?: boolean } = {},
): Promise<Answer> {
  const headers: Record<string, string> = { 'content-type': 'application/json', 'x-tenant': tenant }
  if (o.usage) {
    headers['x-fake-prompt'] = String(o.usage[0])
    headers['x-fake-completion'] = String(o.usage[1])
  }
  if (o.chunks !== undefined) headers['x-fake-chunks'] = String(o.chunks)
  const body = {
    model: 'm',
    messages: PROMPT,
    max_tokens: o.maxTokens ?? 500,
    ...(o.stream ? { stream: true } : {}),
    ...(o.includeUsage ? { stream_options: { include_usage: true } } : {}),
  }
  const before = await settlements(gw)
  const r = await fetch(`${gw.url}${path}`, { method: 'POST', headers, body: JSON.stringify(body) })
  const text = await r.text()
  // The settlement follows the response's end: the next request must read the store after it.
  if (r.status === 200) await waitFor(async () => (await settlements(gw)) > before, `the settlement of ${path} for ${tenant}`)
  return { status: r.status, remaining: Number(r.headers.get('ratelimit-remaining')), headers: r.headers, text }
}

/** LLM reservations the gateway has settled, on every `by` (each counts once its store write is done). */
const settlements = (gw: GatewayProcess): Promise<number> => metricSum(gw, 'fairvisor_token_settlements_total')

/** `actual` is `expected` plus at most `slack` tokens of refill. */
function near(actual: number, expected: number, what: string, slack = 8): void {
  assert.ok(
    actual >= expected && actual <= expected + slack,
    `${what}: RateLimit-Remaining ${actual}, expected ${expected} (+ refill ≤ ${slack})`,
  )
}

/**
 * POSTs `total` bytes in 64 KiB chunks. At each byte count in `pauses` the
 * client stops sending until `resume(sent)` resolves.
 */
function upload(
  gw: GatewayProcess,
  path: string,
  total: number,
  pauses: number[] = [],
  resume: (sent: number) => Promise<void> = () => Promise.resolve(),
): Promise<{ status: number; body: string }> {
  const chunk = Buffer.alloc(64 * 1024, 0x61)
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      `${gw.url}${path}`,
      { method: 'POST', headers: { 'x-tenant': 'up', 'content-type': 'application/octet-stream', 'content-length': String(total) } },
      (res) => {
        let b = ''
        res.on('data', (c: Buffer) => (b += c.toString()))
        res.on('end', () => resolve({ status: res.statusCode!, body: b }))
      },
    )
    req.on('error', reject)
    let sent = 0
    const go = (): void => {
      while (sent < total) {
        if (sent === pauses[0]) return void resume(pauses.shift()!).then(go, reject)
        const piece = chunk.subarray(0, Math.min(chunk.length, total - sent, (pauses[0] ?? total) - sent))
        sent += piece.length
        if (!req.write(piece)) return void req.once('drain', go)
      }
      req.end()
    }
    go()
  })
}

for (const store of ['memory', 'redis://127.0.0.1:6379']) {
  describe(`token_bucket_llm through the gateway (${store.startsWith('redis') ? 'redis' : 'memory'})`, { timeout: 120_000 }, () => {
    let llm: FakeLlm
    let gw: GatewayProcess

    before(async () => {
      llm = await startFakeLlm()
      const dir = mkdtempSync(join(tmpdir(), 'fv-llm-'))
      gw = await startGateway({
        FAIRVISOR_BACKEND_URL: llm.url,
        FAIRVISOR_CONFIG_FILE: writeBundle(dir),
        FAIRVISOR_STORE: store,
        FAIRVISOR_REDIS_TIMEOUT_MS: '2000',
      })
    })

    after(async () => {
      const code = await gw?.stop()
      await llm?.close()
      assert.equal(code, 0)
    })

    test('fewer tokens used than reserved are given back; an overrun is charged (JSON usage)', async () => {
      // Reserved: 100 (prompt estimate) + 500 (max_tokens) = 600.
      const r1 = await call(gw, '/a/v1/chat/completions', 'refund', { usage: [90, 10] })
      assert.equal(r1.status, 200)
      near(r1.remaining, 10000 - 600, 'first call')
      const r2 = await call(gw, '/a/v1/chat/completions', 'refund', { usage: [100, 1000] })
      near(r2.remaining, 10000 - 100 - 600, 'after a call that used 100 of 600')
      const r3 = await call(gw, '/a/v1/chat/completions', 'refund', {})
      near(r3.remaining, 10000 - 100 - 1100 - 600, 'after a call that used 1100 of 600', 12)
      // r3 reported no usage: its reservation is kept.
      const r4 = await call(gw, '/a/v1/chat/completions', 'refund', { usage: [1, 1] })
      near(r4.remaining, 10000 - 100 - 1100 - 600 - 600, 'after a call without usage', 16)
    })

    test('usage from the last SSE chunk (include_usage) and from Anthropic JSON and SSE', async () => {
      const s1 = await call(gw, '/a/v1/chat/completions', 'sse', { stream: true, usage: [80, 200], includeUsage: true, chunks: 3 })
      assert.match(s1.text, /\[DONE\]/)
      const s2 = await call(gw, '/a/v1/messages', 'sse', { usage: [50, 30] })
      near(s2.remaining, 10000 - 280 - 600, 'after an OpenAI stream that used 280')
      const s3 = await call(gw, '/a/v1/messages', 'sse', { stream: true, usage: [50, 120], chunks: 3 })
      assert.match(s3.text, /message_stop/)
      const s4 = await call(gw, '/a/v1/messages', 'sse', { usage: [1, 1] })
      near(s4.remaining, 10000 - 280 - 80 - 170 - 600, 'after Anthropic JSON (80) and SSE (170)', 12)
    })

    test('the day counter rejects with an OpenAI-style body and Retry-After at the next UTC midnight, jittered by at most a minute', async () => {
      for (let i = 0; i < 3; i++)
        assert.equal(
          (await call(gw, '/day/v1/chat/completions', 't', { usage: [100, 0] })).status,
          200,
          `call ${i} (day counter settled to 100 each)`,
        )
      assert.equal((await call(gw, '/day/v1/chat/completions', 't', {})).status, 200) // no usage: 600 kept → 900
      assert.equal((await call(gw, '/day/v1/chat/completions', 't', {})).status, 200) // → 1500
      const r = await call(gw, '/day/v1/chat/completions', 't', { usage: [1, 1] })
      const toMidnight = Math.ceil(86400 - ((Date.now() / 1000) % 86400))
      // Past FAIRVISOR_LLM_MAX_RETRY_AFTER (60 s) the reject is a 403 that says not to retry.
      assert.equal(r.status, toMidnight > 62 ? 403 : 429)
      if (r.status === 403) assert.equal(r.headers.get('x-should-retry'), 'false')
      assert.equal(r.headers.get('x-fairvisor-reason'), 'tpd_exceeded')
      assert.equal(r.headers.get('content-type'), 'application/json')
      const body = JSON.parse(r.text) as { error: { type: string; code: string; message: string } }
      assert.equal(body.error.type, 'rate_limit_error')
      assert.equal(body.error.code, 'rate_limit_exceeded')
      const retry = Number(r.headers.get('retry-after'))
      assert.ok(retry >= toMidnight - 2 && retry <= toMidnight + 62, `Retry-After ${retry}, seconds to midnight ${toMidnight}`)
      assert.equal(r.headers.get('ratelimit-remaining'), '0')
    })

    test('a stream is ended at max_completion_tokens with graceful_close, and the streamed tokens are charged', async () => {
      const r = await call(gw, '/gc/v1/chat/completions', 'cut', { stream: true, chunks: 20 })
      const events = r.text.split('\n\n').filter((e) => e.startsWith('data: '))
      // 6 content events (60 tokens > 50), then as OpenAI ends a reply at its limit: the finish chunk, the usage chunk, [DONE].
      assert.equal(events.length, 9, r.text)
      const fin = JSON.parse(events[6]!.slice(6)) as { id: string; object: string; choices: { index: number; finish_reason: string }[] }
      assert.deepEqual(
        [fin.id, fin.object, fin.choices[0]!.index, fin.choices[0]!.finish_reason],
        ['c1', 'chat.completion.chunk', 0, 'length'],
      )
      const last = JSON.parse(events[7]!.slice(6)) as { choices: unknown[]; usage: { completion_tokens: number; prompt_tokens: number } }
      assert.deepEqual(last.choices, [])
      assert.deepEqual(last.usage, { prompt_tokens: 100, completion_tokens: 60, total_tokens: 160 })
      assert.equal(events[8], 'data: [DONE]')
      near(r.remaining, 10000 - 150, 'reserved 100 + 50')
      const next = await call(gw, '/gc/v1/chat/completions', 'cut', { usage: [1, 1] })
      near(next.remaining, 10000 - 160 - 150, 'the cut stream settled on 160 tokens')
    })

    test('error_chunk ends the stream with the error event; shadow logs would_truncate and never cuts', async () => {
      const e = await call(gw, '/ec/v1/chat/completions', 'cut', { stream: true, chunks: 20 })
      const events = e.text.split('\n\n').filter((x) => x.startsWith('data: '))
      assert.equal(events.length, 7)
      const last = JSON.parse(events[6]!.slice(6)) as { error: { code: string; type: string }; usage: object }
      assert.equal(last.error.code, 'completion_tokens_exceeded')
      assert.equal(last.error.type, 'rate_limit_error')
      const s = await call(gw, '/sh/v1/chat/completions', 'cut', { stream: true, chunks: 20 })
      assert.equal(s.status, 200)
      assert.match(s.text, /\[DONE\]/)
      assert.equal(s.text.split('\n\n').filter((x) => x.startsWith('data: ')).length, 22)
      const line = await gw.waitForLog((l) => l.event === 'would_truncate')
      assert.equal(line.why, 'shadow')
    })

    test('a 50 MB upload streams through an LLM rule: the gateway holds its first MiB, then forwards what it is sent', async () => {
      // Streamed, not buffered, by what the backend holds at each pause of the client: the
      // first MiB once the client has sent it (the decision's estimate), every byte sent so
      // far at each later pause. A gateway holding more would leave the client waiting
      // here. (Its RSS says nothing of this: V8 frees the 64 KiB chunks of a 50 MB body
      // when it next collects, and lets external memory grow by up to 64 MiB before it must.)
      const total = 50 * 1024 * 1024
      const pauses = [MIB, 8 * MIB, 16 * MIB, 24 * MIB, 32 * MIB, 40 * MIB, 48 * MIB]
      const answer = await upload(gw, '/up/upload', total, [...pauses], (sent) => llm.uploaded(sent))
      assert.equal(answer.status, 200, answer.body)
      assert.equal((JSON.parse(answer.body) as { received: number }).received, total)
    })
  })
}
