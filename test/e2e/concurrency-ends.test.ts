/**
 * A concurrency slot goes back however its exchange ends: one slot
 * (`max_concurrent: 1`, a lease of 300 s, so nothing but a give-back can free
 * it) shared by a plain policy and an LLM one (same rule name, one counter).
 * While a request holds it, the next is rejected; after each way an exchange
 * can end the gateway counts one give-back and the next request passes: the
 * response sent whole, the client gone mid-request, the backend's connection
 * lost (502), the backend too slow (504), an LLM stream cut at
 * max_completion_tokens, and an upgraded (WebSocket) connection closed.
 */
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { connect, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, it } from 'node:test'
import { Pool } from 'undici'
import { metricValue, startBackend, startGateway, type Backend, type GatewayProcess } from '../helpers/processes.js'
import { waitFor } from '../helpers/wait.js'

const slot = { name: 'one_at_a_time', limit_keys: ['header:x-tenant'], algorithm: 'concurrency', algorithm_config: { max_concurrent: 1 } }
const llmRule = {
  name: 'llm_tokens',
  limit_keys: ['header:x-tenant'],
  algorithm: 'token_bucket_llm',
  algorithm_config: { tokens_per_minute: 100_000, burst_tokens: 100_000, max_completion_tokens: 50, streaming: { buffer_tokens: 10 } },
}
const bundle = {
  bundle_version: 1,
  policies: [
    { id: 'llm', spec: { selector: { pathPrefix: '/v1/' }, rules: [slot, llmRule] } },
    { id: 'api', spec: { selector: { pathPrefix: '/work/' }, rules: [slot] } },
  ],
}

const dir = mkdtempSync(join(tmpdir(), 'fv-concurrency-ends-'))
let backend: Backend
let active = 0
let gw: GatewayProcess
let pool: Pool

/** An SSE stream far longer than max_completion_tokens (10 tokens per event). */
function longStream(res: import('node:http').ServerResponse): void {
  res.writeHead(200, { 'content-type': 'text/event-stream' })
  let i = 0
  const next = (): void => {
    if (res.destroyed || i++ > 200) return void res.end()
    res.write(`data: ${JSON.stringify({ id: 'c1', choices: [{ index: 0, delta: { content: 'abcdefghij'.repeat(4) } }] })}\n\n`)
    setTimeout(next, 5)
  }
  next()
}

before(async () => {
  backend = await startBackend((req, res) => {
    active++
    res.once('close', () => active--)
    if (req.url?.startsWith('/v1/')) return void req.resume().once('end', () => longStream(res))
    const hold = req.headers['x-hold']
    if (hold === 'open') return
    if (hold === 'reset') return void req.socket.destroy()
    res.end('ok')
  })
  backend.server.on('upgrade', (_req, socket: Socket) => {
    active++
    socket.once('close', () => active--)
    socket.once('end', () => socket.end()) // closes when the other side does, as a WebSocket server does
    socket.write('HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: upgrade\r\n\r\n')
  })
  const file = join(dir, 'bundle.json')
  writeFileSync(file, JSON.stringify(bundle))
  gw = await startGateway({ FAIRVISOR_BACKEND_URL: backend.url, FAIRVISOR_CONFIG_FILE: file, FAIRVISOR_UPSTREAM_TIMEOUT_MS: '500' })
  pool = new Pool(gw.url, { connections: 4 })
})
after(async () => {
  await pool?.destroy()
  await gw?.stop()
  await backend?.close()
  rmSync(dir, { recursive: true, force: true })
})

async function send(hold?: string, signal?: AbortSignal): Promise<number> {
  const r = await pool.request({
    path: '/work/x',
    method: 'GET',
    headers: { 'x-tenant': 'acme', ...(hold === undefined ? {} : { 'x-hold': hold }) },
    signal,
  })
  await r.body.dump()
  return r.statusCode
}

const released = async (): Promise<number> => (await metricValue(gw, 'fairvisor_concurrency_releases_total', 'result="released"')) ?? 0

/** Runs `exchange`, which ends with the slot given back: the gateway counts it, and the next request passes. */
async function endsAndFrees(what: string, exchange: () => Promise<void>): Promise<void> {
  const before = await released()
  await exchange()
  await waitFor(async () => (await released()) === before + 1, `${what}: the slot given back`)
  await waitFor(() => active === 0, `${what}: the backend's side closed`)
  assert.equal(await send(), 200, `${what}: the next request passes`)
}

it('the response sent whole', async () => {
  await endsAndFrees('finished', async () => assert.equal(await send(), 200))
})

it('the client gone mid-request (the request held the slot meanwhile)', async () => {
  await endsAndFrees('client gone', async () => {
    const c = new AbortController()
    const held = send('open', c.signal).catch(() => 0)
    await waitFor(() => active === 1, 'the request at the backend')
    assert.equal(await send(), 429, 'the slot is held')
    c.abort()
    assert.equal(await held, 0)
  })
})

it('the backend’s connection lost: 502', async () => {
  await endsAndFrees('backend gone', async () => assert.equal(await send('reset'), 502))
})

it('the backend too slow: 504 after FAIRVISOR_UPSTREAM_TIMEOUT_MS', async () => {
  await endsAndFrees('backend timeout', async () => assert.equal(await send('open'), 504))
})

it('an LLM stream cut at max_completion_tokens', async () => {
  await endsAndFrees('stream cut', async () => {
    const r = await pool.request({
      path: '/v1/chat/completions',
      method: 'POST',
      headers: { 'x-tenant': 'acme', 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }] }),
    })
    const text = await r.body.text()
    assert.equal(r.statusCode, 200)
    assert.match(text, /"finish_reason":"length"/, 'cut by the gateway')
  })
})

it('an upgraded connection, held until it closes', async () => {
  await endsAndFrees('upgrade closed', async () => {
    const socket = connect(gw.port, '127.0.0.1')
    const head = new Promise<string>((resolve) => socket.once('data', (d) => resolve(d.toString('latin1'))))
    socket.write('GET /work/ws HTTP/1.1\r\nhost: x\r\nx-tenant: acme\r\nconnection: upgrade\r\nupgrade: websocket\r\n\r\n')
    assert.match(await head, /^HTTP\/1\.1 101/)
    assert.equal(await send(), 429, 'the slot is held while the connection is open')
    const closed = new Promise((resolve) => socket.once('close', resolve))
    socket.destroy()
    await closed
  })
})

it('every allowed request gave its slot back exactly once, and none is held now', async () => {
  const text = await (await fetch(`${gw.url}/metrics`)).text()
  const allowed = text
    .split('\n')
    .filter((l) => l.startsWith('fairvisor_decisions_total{') && l.includes('action="allow"'))
    .reduce((n, l) => n + Number(l.slice(l.lastIndexOf(' ') + 1)), 0)
  assert.ok(allowed >= 12, `allowed decisions: ${allowed}`)
  assert.equal(await released(), allowed)
  assert.equal((await metricValue(gw, 'fairvisor_concurrency_in_flight', 'policy="api"')) ?? 0, 0)
  assert.equal((await metricValue(gw, 'fairvisor_concurrency_releases_total', 'result="dropped"')) ?? 0, 0)
})
