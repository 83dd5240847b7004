/**
 * What each LLM client does with a rejected call, measured side by side in one
 * run (npm run build && node --import tsx test/bench/llm-client-retries.bench.ts [capSeconds=12]):
 * every client of test/helpers/llm-clients.ts, with its default retry settings,
 * calls the real gateway (an LLM rule that lets everything through) in front of
 * an upstream that answers each variant below in the shape of the client's API
 * (OpenAI's error body, or Anthropic's on /v1/messages), then its recorded
 * success answer to any later attempt. Printed per client × variant: the
 * attempts the upstream saw, the seconds until the call returned (or `hang`
 * when it was still waiting at the cap, aborted then), and how it ended.
 * This is the table docs/llm.md ("Rejects that end") gives, and the evidence
 * for the answer the gateway sends.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { CLIENTS, callClient, DIALECT, type ClientName } from '../helpers/llm-clients.js'
import { startBackend, startGateway } from '../helpers/processes.js'

const CAP_S = Number(process.argv[2] ?? 12)

interface Variant {
  status: number
  headers: Record<string, string>
  /** OpenAI error type and code, Anthropic error type. */
  type?: string
  code?: string
  /** Rejects the first attempt only: later ones get the success answer. */
  once?: boolean
}

const VARIANTS: Record<string, Variant> = {
  '429 Retry-After: 29259': { status: 429, headers: { 'retry-after': '29259' } },
  '429 retry-after-ms: 29259000': { status: 429, headers: { 'retry-after-ms': '29259000' } },
  '429 x-should-retry: false': { status: 429, headers: { 'x-should-retry': 'false' } },
  '429 x-should-retry: false, insufficient_quota': {
    status: 429,
    headers: { 'x-should-retry': 'false' },
    type: 'insufficient_quota',
    code: 'insufficient_quota',
  },
  '429 Retry-After: 120': { status: 429, headers: { 'retry-after': '120' } },
  '400 x-should-retry: false': { status: 400, headers: { 'x-should-retry': 'false' }, type: 'invalid_request_error' },
  '402': { status: 402, headers: {}, type: 'billing_error' },
  '403 x-should-retry: false': { status: 403, headers: { 'x-should-retry': 'false' }, type: 'permission_error' },
  '413': { status: 413, headers: {}, type: 'request_too_large' },
  '429 Retry-After: 1, then 200': { status: 429, headers: { 'retry-after': '1' }, once: true },
  '429 retry-after-ms: 300, then 200': { status: 429, headers: { 'retry-after-ms': '300' }, once: true },
}
const NAMES = Object.keys(VARIANTS)

const fixture = (name: string): string => readFileSync(new URL(`../fixtures/llm/${name}`, import.meta.url), 'utf8')
const OK = { chat: fixture('chat.json'), messages: fixture('messages.json'), responses: fixture('responses.json') }

interface Seen {
  attempts: number
}
const seen = new Map<string, Seen>()

function answer(req: IncomingMessage, res: ServerResponse): void {
  // /<variant index>/<client>/v1/<api path>
  const [, vi, client, ...rest] = (req.url ?? '').split('?')[0]!.split('/')
  const id = `${vi}/${client}`
  const s = seen.get(id) ?? { attempts: 0 }
  seen.set(id, s)
  s.attempts++
  const v = VARIANTS[NAMES[Number(vi)]!]!
  const path = `/${rest.join('/')}`
  const dialect = path.endsWith('/messages') ? 'messages' : path.endsWith('/responses') ? 'responses' : 'chat'
  if (v.once === true && s.attempts > 1) {
    res.writeHead(200, { 'content-type': 'application/json' })
    return void res.end(OK[dialect])
  }
  const message = 'Rate limit reached for tokens per day.'
  const body =
    dialect === 'messages'
      ? { type: 'error', error: { type: v.type ?? 'rate_limit_error', message } }
      : { error: { message, type: v.type ?? 'rate_limit_error', param: null, code: v.code ?? 'rate_limit_exceeded' } }
  res.writeHead(v.status, { 'content-type': 'application/json', ...v.headers })
  res.end(JSON.stringify(body))
}

async function main(): Promise<void> {
  const upstream = await startBackend((req, res) => {
    req.resume()
    req.on('end', () => answer(req, res))
  })
  const dir = mkdtempSync(join(tmpdir(), 'fv-retries-'))
  const bundle = join(dir, 'bundle.json')
  writeFileSync(
    bundle,
    JSON.stringify({
      bundle_version: 1,
      policies: [
        {
          id: 'llm',
          spec: {
            selector: { pathPrefix: '/' },
            mode: 'enforce',
            rules: [
              {
                name: 'tokens',
                limit_keys: ['llm:api_key'],
                algorithm: 'token_bucket_llm',
                algorithm_config: { tokens_per_minute: 100_000_000 },
              },
            ],
          },
        },
      ],
    }),
  )
  const gw = await startGateway({ FAIRVISOR_BACKEND_URL: upstream.url, FAIRVISOR_CONFIG_FILE: bundle, FAIRVISOR_STORE: 'memory' })
  const rows = new Map<string, string>()
  // Every call at once: a client that sleeps through a Retry-After costs the cap, not the cap times the calls.
  await Promise.all(
    CLIENTS.flatMap((client: ClientName) =>
      NAMES.map(async (_name, vi) => {
        const started = performance.now()
        const signal = AbortSignal.timeout(CAP_S * 1000)
        // Some clients' sleeps before a retry do not listen to the signal: the cap is raced, not awaited from them.
        const capped = new Promise<string>((resolve) => signal.addEventListener('abort', () => resolve('hang')))
        const call = callClient(client, { root: `${gw.url}/${vi}/${client}`, signal }).then(
          () => 'ok',
          (err: Error & { status?: number; statusCode?: number }) =>
            signal.aborted ? 'hang' : `${err.constructor?.name ?? err.name} ${err.status ?? err.statusCode ?? ''}`.trim(),
        )
        const outcome = await Promise.race([call, capped])
        const s = (performance.now() - started) / 1000
        const attempts = seen.get(`${vi}/${client}`)?.attempts ?? 0
        rows.set(`${client}|${vi}`, `${attempts} / ${outcome === 'hang' ? `≥${CAP_S}` : s.toFixed(1)} s / ${outcome}`)
      }),
    ),
  )
  await gw.stop()
  await upstream.close()
  console.log(`attempts / seconds / outcome (cap ${CAP_S} s; default retry settings of each client)\n`)
  for (const [vi, name] of NAMES.entries()) {
    console.log(`## ${name}`)
    for (const client of CLIENTS) console.log(`  ${client.padEnd(20)} (${DIALECT[client].padEnd(9)}) ${rows.get(`${client}|${vi}`)}`)
  }
}

await main()
// Calls still sleeping through a Retry-After hold timers: the run is over.
process.exit(0)
