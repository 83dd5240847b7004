/**
 * The admin API and `fairvisor status` through the real gateway process (docs/admin.md): a gateway
 * with an admin port and a token under traffic; GET /v1/admin/top names the keys that were rejected
 * (a credential as its logged hash), with the counts the clients saw; DELETE /v1/admin/counters for
 * such a key makes its next request pass; on the in-process store shared by 2 worker threads and on
 * Redis (a private server). A missing or wrong token is 401 and nothing else. In decision-service
 * mode the admin API answers on the admin port too, never on the public one. Without a token the
 * API is off and start-up says so; a token without an admin port stops start-up.
 */
import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { shortHash } from '../../src/engine/log-key.js'
import { ADMIN_TOKEN, adminBundleText } from '../helpers/admin.js'
import { type Backend, CLI, freePort, type GatewayProcess, ROOT, startBackend, startGateway } from '../helpers/processes.js'
import { type RedisServer, startRedis } from '../helpers/redis-servers.js'

const dir = mkdtempSync(join(tmpdir(), 'fv-admin-'))
const BUNDLE = join(dir, 'bundle.json')
writeFileSync(BUNDLE, adminBundleText(5))
after(() => rmSync(dir, { recursive: true, force: true }))

interface Answer {
  status: number
  headers: Headers
  body: Record<string, unknown>
}

async function admin(gw: GatewayProcess, path: string, init: { method?: string; token?: string | null } = {}): Promise<Answer> {
  const token = init.token === undefined ? ADMIN_TOKEN : init.token
  const res = await fetch(`http://127.0.0.1:${gw.adminPort}${path}`, {
    method: init.method ?? 'GET',
    headers: token === null ? {} : { authorization: `Bearer ${token}` },
  })
  return { status: res.status, headers: res.headers, body: (await res.json()) as Record<string, unknown> }
}

interface TopEntry {
  policy: string
  rule: string
  reason: string
  key: string
  count: number
  error: number
}

const topOf = async (gw: GatewayProcess): Promise<TopEntry[]> => (await admin(gw, '/v1/admin/top')).body.entries as TopEntry[]

/** A request as the mode's clients send it: proxied, or asked of the decision API. */
type Send = (headers: Record<string, string>) => Promise<number>
const proxied =
  (gw: GatewayProcess): Send =>
  async (headers) =>
    (await fetch(`${gw.url}/x`, { headers })).status
const decided =
  (gw: GatewayProcess): Send =>
  async (headers) =>
    (await fetch(`${gw.url}/v1/decision`, { method: 'POST', headers: { 'x-original-uri': '/x', 'x-original-method': 'GET', ...headers } }))
      .status

/** Sends `n` requests one after the other; how many were rejected (429). */
async function rejects(send: Send, headers: Record<string, string>, n: number): Promise<number> {
  let r = 0
  for (let i = 0; i < n; i++) {
    const status = await send(headers)
    assert.ok(status === 200 || status === 429, `status ${status}`)
    if (status === 429) r++
  }
  return r
}

/**
 * The whole loop an operator runs: traffic, the top keys, the unblock. `alice` (burst 2) and an API key
 * (a credential, burst 1) are rejected; each appears in top with exactly the rejects the clients saw
 * (few keys: the sketches count exactly); a DELETE of each, the API key by its shown hash, lets its
 * next request through, and the reset is logged with who asked.
 */
async function unblockLoop(gw: GatewayProcess, send: Send): Promise<void> {
  const alice = await rejects(send, { 'x-user': 'alice' }, 6)
  const apiKey = 'sk-e2e-secret-key'
  const keyed = await rejects(send, { 'x-api-key': apiKey }, 5)
  assert.deepEqual([alice, keyed], [4, 4], 'the buckets let burst requests through, then reject')
  assert.equal(await rejects(send, { 'x-user': 'bob' }, 2), 0)

  const top = (await topOf(gw)).sort((a, b) => a.rule.localeCompare(b.rule))
  const shown = shortHash(apiKey)
  assert.deepEqual(top, [
    { policy: 'api', rule: 'per_key', reason: 'token_bucket_exceeded', key: shown, count: 4, error: 0 },
    { policy: 'api', rule: 'per_user', reason: 'token_bucket_exceeded', key: 'alice', count: 4, error: 0 },
  ])
  assert.doesNotMatch(JSON.stringify(top), new RegExp(apiKey), 'a credential never in clear')

  const stats = (await admin(gw, '/v1/admin/stats')).body
  assert.deepEqual(stats.decisions, { allow: 5, reject: 8, shadow_reject: 0 }, 'summed over the workers')
  assert.deepEqual(stats.rejects_by_reason, { token_bucket_exceeded: 8 })

  const counter = await admin(gw, '/v1/admin/counters?policy=api&rule=per_user&key=alice')
  assert.equal(counter.status, 200)
  assert.deepEqual([counter.body.limit, counter.body.remaining, counter.body.in_flight], [2, 0, null])
  assert.equal(await send({ 'x-user': 'alice' }), 429, 'reading the counter changed nothing')

  for (const [rule, key, headers] of [
    ['per_user', 'alice', { 'x-user': 'alice' }],
    ['per_key', shown, { 'x-api-key': apiKey }],
  ] as const) {
    const del = await admin(gw, `/v1/admin/counters?policy=api&rule=${rule}&key=${encodeURIComponent(key)}`, { method: 'DELETE' })
    assert.deepEqual(del.body, { reset: true, policy: 'api', rule, key })
    assert.equal(await send(headers), 200, `${rule}: the next request passes`)
    const line = await gw.waitForLog((l) => l.event === 'admin_counter_reset' && l.rule === rule)
    assert.deepEqual([line.level, line.key, line.remote], ['info', key, '127.0.0.1'])
  }
  assert.ok(!gw.logs.some((l) => JSON.stringify(l).includes(apiKey)), 'no log line holds the credential')
}

async function unauthorised(gw: GatewayProcess): Promise<void> {
  for (const token of [null, 'not-the-token', ADMIN_TOKEN.slice(0, -1)])
    for (const [path, method] of [
      ['/v1/admin/top', 'GET'],
      ['/v1/admin/counters?policy=api&rule=per_user&key=alice', 'DELETE'],
    ]) {
      const r = await admin(gw, path!, { token, method })
      assert.equal(r.status, 401)
      assert.deepEqual(r.body, { error: { code: 'admin_unauthorized', message: 'unauthorized' } })
      assert.equal(r.headers.get('www-authenticate'), 'Bearer')
    }
}

const gatewayEnv = (extra: Record<string, string>): Record<string, string> => ({
  FAIRVISOR_CONFIG_FILE: BUNDLE,
  FAIRVISOR_ADMIN_PORT: '0',
  FAIRVISOR_ADMIN_TOKEN: ADMIN_TOKEN,
  FAIRVISOR_WORKERS: '2',
  ...extra,
})

describe('the admin API under traffic', { timeout: 180_000 }, () => {
  let backend: Backend
  before(async () => {
    backend = await startBackend()
  })
  after(() => backend.close())

  test('in-process store shared by 2 worker threads: top names the rejected keys, DELETE unblocks them; 401 without the token', async () => {
    const gw = await startGateway(gatewayEnv({ FAIRVISOR_BACKEND_URL: backend.url }), { timeoutMs: 60_000 })
    try {
      await gw.waitForLog((l) => l.adminApi === true)
      await unauthorised(gw)
      await unblockLoop(gw, proxied(gw))
      const bundle = (await admin(gw, '/v1/admin/bundle')).body
      assert.deepEqual([bundle.version, bundle.workers, bundle.store], ['5', 2, { kind: 'shared', healthy: true }])
    } finally {
      assert.equal(await gw.stop(), 0)
    }
  })

  describe('on Redis', () => {
    let redis: RedisServer
    before(async () => {
      redis = await startRedis()
    })
    after(() => redis.stop())

    test('the same loop: the counters deleted on the server', async () => {
      const gw = await startGateway(gatewayEnv({ FAIRVISOR_BACKEND_URL: backend.url, FAIRVISOR_STORE: redis.url }), { timeoutMs: 60_000 })
      try {
        await unauthorised(gw)
        await unblockLoop(gw, proxied(gw))
        assert.deepEqual((await admin(gw, '/v1/admin/bundle')).body.store, { kind: 'redis', healthy: true })
        assert.equal(redis.cli('EXISTS', 'tb:per_user:bob'), '1', 'a key not reset keeps its counter')
      } finally {
        assert.equal(await gw.stop(), 0)
      }
    })
  })

  test('decision-service mode: the admin API on the admin port, never on the public one', async () => {
    const gw = await startGateway(gatewayEnv({ FAIRVISOR_MODE: 'decision_service', FAIRVISOR_WORKERS: '1' }), { timeoutMs: 60_000 })
    try {
      await unauthorised(gw)
      await unblockLoop(gw, decided(gw))
      const pub = await fetch(`${gw.url}/v1/admin/bundle`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
      assert.equal(pub.status, 404)
      assert.deepEqual(await pub.json(), { error: 'not_found' })
      assert.equal((await admin(gw, '/v1/admin/bundle')).body.mode, 'decision_service')
    } finally {
      assert.equal(await gw.stop(), 0)
    }
  })

  test('without FAIRVISOR_ADMIN_TOKEN the admin API is off, and start-up says so', async () => {
    const gw = await startGateway({ FAIRVISOR_CONFIG_FILE: BUNDLE, FAIRVISOR_ADMIN_PORT: '0', FAIRVISOR_BACKEND_URL: backend.url })
    try {
      const line = await gw.waitForLog((l) => l.adminApi === false)
      assert.match(line.msg, /admin API off/)
      const r = await admin(gw, '/v1/admin/top')
      assert.equal(r.status, 404)
      assert.equal((r.body.error as { code: string }).code, 'admin_disabled')
    } finally {
      assert.equal(await gw.stop(), 0)
    }
  })

  test('a token without FAIRVISOR_ADMIN_PORT stops start-up (exit 2): the API never shares the public listener', () => {
    const r = spawnSync(process.execPath, [CLI], {
      cwd: ROOT,
      encoding: 'utf8',
      timeout: 30_000,
      env: { PATH: process.env.PATH, FAIRVISOR_PORT: '0', FAIRVISOR_MODE: 'decision_service', FAIRVISOR_ADMIN_TOKEN: ADMIN_TOKEN },
    })
    assert.equal(r.status, 2)
    assert.match(r.stderr, /FAIRVISOR_ADMIN_TOKEN: needs FAIRVISOR_ADMIN_PORT/)
  })
})

/** `fairvisor status` as a process; its exit code and output. */
function status(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const p = spawn(process.execPath, [CLI, 'status', ...args], { cwd: ROOT, env: { PATH: process.env.PATH, ...env } })
    let stdout = ''
    let stderr = ''
    p.stdout.on('data', (c: Buffer) => (stdout += c))
    p.stderr.on('data', (c: Buffer) => (stderr += c))
    p.on('exit', (code) => resolve({ code, stdout, stderr }))
  })
}

describe('fairvisor status against a real gateway', { timeout: 120_000 }, () => {
  test('ready: 0, with the bundle, the rates and the rejected key; not ready: 1; unreachable: 3', async () => {
    const gw = await startGateway(gatewayEnv({ FAIRVISOR_MODE: 'decision_service', FAIRVISOR_WORKERS: '1' }))
    try {
      const send = decided(gw)
      assert.equal(await rejects(send, { 'x-user': 'carol' }, 4), 2)
      const url = `http://127.0.0.1:${gw.adminPort}`
      const r = await status(['--admin-url', url], { FAIRVISOR_ADMIN_TOKEN: ADMIN_TOKEN })
      assert.equal(r.code, 0, r.stderr)
      assert.match(r.stdout, new RegExp(`^${url}: ready \\(bundle version 5, store ok\\)$`, 'm'))
      assert.match(r.stdout, /^bundle {3}version 5, /m)
      assert.match(r.stdout, /^policy {3}api \(enforce\): per_user token_bucket by header:x-user; per_key/m)
      assert.match(r.stdout, /^rates {4}[\d.]+ decisions\/s over [\d.]+ s: /m)
      assert.match(r.stdout, /^ {2}2 +api +per_user +token_bucket_exceeded +carol$/m)
      // The token from the command line wins; a wrong one is refused (3), readiness printed first.
      const refused = await status(['--admin-url', url, '--token', 'a-wrong-token-0123456789'])
      assert.equal(refused.code, 3)
      assert.match(refused.stderr, /401 admin_unauthorized/)
      // Without a token: readiness only.
      const bare = await status([], { FAIRVISOR_ADMIN_PORT: String(gw.adminPort) })
      assert.equal(bare.code, 0)
      assert.match(bare.stdout, /no admin token/)
    } finally {
      assert.equal(await gw.stop(), 0)
    }
    const empty = await startGateway({ FAIRVISOR_MODE: 'decision_service', FAIRVISOR_ADMIN_PORT: '0' })
    try {
      const r = await status(['--admin-url', `http://127.0.0.1:${empty.adminPort}`])
      assert.equal(r.code, 1)
      assert.match(r.stdout, /NOT READY \(no_policy_loaded/)
    } finally {
      assert.equal(await empty.stop(), 0)
    }
    const gone = await status(['--admin-url', `http://127.0.0.1:${await freePort()}`, '--token', ADMIN_TOKEN])
    assert.equal(gone.code, 3)
    assert.match(gone.stderr, /admin API unreachable: .*ECONNREFUSED/)
  })

  test('a bad command line: 2', async () => {
    assert.equal((await status(['--admin-url', 'ftp://x'])).code, 2)
    assert.equal((await status(['--nope'])).code, 2)
    assert.equal((await status([])).code, 2, 'no URL and no FAIRVISOR_ADMIN_PORT')
  })
})
