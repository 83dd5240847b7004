/**
 * Rejects that end (docs/llm.md), with every common LLM client at its default
 * retry settings (test/helpers/llm-clients.ts: the OpenAI and Anthropic SDKs,
 * the AI SDK with its three providers, LangChain's ChatOpenAI and
 * ChatAnthropic, the Agents SDK on the Responses and Chat Completions APIs)
 * calling the real gateway in front of an upstream that answers the recorded
 * shapes of each API. A spent day, a reservation larger than the bucket, and
 * a wait past FAIRVISOR_LLM_MAX_RETRY_AFTER each reach the gateway once (no
 * retry) and end the call well within the bound; a 429 that can pass is
 * retried after its Retry-After and succeeds. The last waits about 2 s per
 * client, so the clients make it at once, each on a policy of its own (the
 * refusals are counted per policy).
 */
import assert from 'node:assert/strict'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { startApiLlm, type ApiLlm } from '../helpers/api-llm.js'
import { CLIENTS, callClient, type ClientName } from '../helpers/llm-clients.js'
import { startGateway, type GatewayProcess } from '../helpers/processes.js'

const RUN = `${process.pid}_${Date.now()}`
const BOUND_S = 10

function writeBundle(dir: string): string {
  const p = (id: string, config: object): object => ({
    id,
    spec: {
      selector: { pathPrefix: `/${id}/` },
      mode: 'enforce',
      rules: [{ name: `${id}_${RUN}`, limit_keys: ['llm:api_key'], algorithm: 'token_bucket_llm', algorithm_config: config }],
    },
  })
  const file = join(dir, 'bundle.json')
  writeFileSync(
    file,
    JSON.stringify({
      bundle_version: 1,
      policies: [
        p('day', { tokens_per_minute: 1_000_000, tokens_per_day: 300 }),
        p('burst', { tokens_per_minute: 100 }),
        p('slow', { tokens_per_minute: 6, burst_tokens: 300 }),
        ...CLIENTS.map((client) => p(`pass-${client}`, { tokens_per_minute: 600 })),
      ],
    }),
  )
  return file
}

let upstream: ApiLlm
let gw: GatewayProcess

/** Reserves `tokens` on `key`'s counters and keeps them: the upstream's answer carries no usage. */
async function spend(policy: string, key: string, tokens: number): Promise<void> {
  const r = await fetch(`${gw.url}/${policy}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}`, 'x-no-usage': '1' },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'x' }], max_tokens: tokens - 1 }),
  })
  assert.equal(r.status, 200, await r.text())
}

/** Requests of `policy` the gateway refused so far, whatever the reason. */
const rejects = async (policy: string): Promise<number> =>
  (await fetch(`${gw.url}/metrics`).then((r) => r.text()))
    .split('\n')
    .filter((l) => l.startsWith('fairvisor_decisions_total{') && l.includes('action="reject"') && l.includes(`policy="${policy}"`))
    .reduce((n, l) => n + Number(l.slice(l.lastIndexOf(' ') + 1)), 0)

const statusOf = (err: unknown): number | undefined => {
  const e = err as { status?: unknown; statusCode?: unknown; cause?: unknown }
  if (typeof e?.status === 'number') return e.status
  if (typeof e?.statusCode === 'number') return e.statusCode
  return e?.cause === undefined ? undefined : statusOf(e.cause)
}

/** One call of `client` on `policy` with its own key: what it ended with, how long it took, how often the gateway refused it. */
async function attempt(
  client: ClientName,
  policy: string,
  key: string,
  maxTokens = 20,
): Promise<{ status: number | 'ok'; seconds: number; rejected: number }> {
  const before = await rejects(policy)
  const started = performance.now()
  let status: number | 'ok'
  try {
    await callClient(client, { root: `${gw.url}/${policy}`, apiKey: key, maxTokens })
    status = 'ok'
  } catch (err) {
    status = statusOf(err) ?? -1
  }
  const seconds = (performance.now() - started) / 1000
  return { status, seconds, rejected: (await rejects(policy)) - before }
}

describe('rejects that end, with every client at its default retries', { timeout: 300_000 }, () => {
  before(async () => {
    upstream = await startApiLlm((r) =>
      r.headers['x-no-usage'] === undefined ? undefined : { body: '{"id":"chatcmpl-1","object":"chat.completion","choices":[]}' },
    )
    gw = await startGateway({
      FAIRVISOR_BACKEND_URL: upstream.url,
      FAIRVISOR_CONFIG_FILE: writeBundle(mkdtempSync(join(tmpdir(), 'fv-retry-'))),
      FAIRVISOR_STORE: 'memory',
      FAIRVISOR_LLM_MAX_RETRY_AFTER: String(BOUND_S),
    })
  })

  after(async () => {
    const code = await gw?.stop()
    await upstream?.close()
    assert.equal(code, 0)
  })

  test('a spent day: 403, one attempt, no wait', async (t) => {
    const now = new Date()
    const toMidnight = 86_400 - (now.getUTCHours() * 3600 + now.getUTCMinutes() * 60 + now.getUTCSeconds())
    if (toMidnight <= BOUND_S + 30) return t.skip('the UTC day ends within the bound: that reject may be retried')
    for (const client of CLIENTS) {
      const key = `sk-day-${client}-${RUN}`
      await spend('day', key, 281)
      const r = await attempt(client, 'day', key)
      assert.deepEqual([r.status, r.rejected], [403, 1], `${client}: ${JSON.stringify(r)}`)
      assert.ok(r.seconds < BOUND_S, `${client} took ${r.seconds} s`)
    }
  })

  test('a reservation larger than the bucket: 400 burst_tokens_exceeded, one attempt', async () => {
    for (const client of CLIENTS) {
      const r = await attempt(client, 'burst', `sk-burst-${client}-${RUN}`, 200)
      assert.deepEqual([r.status, r.rejected], [400, 1], `${client}: ${JSON.stringify(r)}`)
      assert.ok(r.seconds < BOUND_S, `${client} took ${r.seconds} s`)
    }
  })

  test('a wait past FAIRVISOR_LLM_MAX_RETRY_AFTER: 403, one attempt', async () => {
    for (const client of CLIENTS) {
      const key = `sk-slow-${client}-${RUN}`
      await spend('slow', key, 290)
      const r = await attempt(client, 'slow', key)
      assert.deepEqual([r.status, r.rejected], [403, 1], `${client}: ${JSON.stringify(r)}`)
      assert.ok(r.seconds < BOUND_S, `${client} took ${r.seconds} s`)
    }
  })

  test('a 429 that can pass is retried after its Retry-After and succeeds', async () => {
    await Promise.all(
      CLIENTS.map(async (client) => {
        const key = `sk-pass-${client}-${RUN}`
        // 14 of 600 tokens left at 10 tokens/s: the call's ~30 fit about 2 s later.
        await spend(`pass-${client}`, key, 586)
        const r = await attempt(client, `pass-${client}`, key)
        assert.deepEqual([r.status, r.rejected], ['ok', 1], `${client}: ${JSON.stringify(r)}`)
        assert.ok(r.seconds < BOUND_S, `${client} took ${r.seconds} s`)
      }),
    )
  })
})
