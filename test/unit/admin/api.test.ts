/**
 * The admin API (src/admin/api.ts) behind a real admin listener (HTTP on port 0) over a real memory
 * store, bundle, metrics and rejected keys: the token first (401 and nothing else), each route's
 * answer, the errors of the catalogue, the reset logged with who asked; off without a token.
 */
import assert from 'node:assert/strict'
import type { AddressInfo } from 'node:net'
import { Writable } from 'node:stream'
import { after, before, describe, test } from 'node:test'
import { pino } from 'pino'
import { adminApi, adminDisabled } from '../../../src/admin/api.js'
import { shortHash } from '../../../src/engine/log-key.js'
import { adminListener, adminRoutes } from '../../../src/http/admin.js'
import { createListener, type Listener } from '../../../src/http/server.js'
import { threadView } from '../../../src/observe/admin-view.js'
import { createMetrics } from '../../../src/observe/metrics.js'
import { RejectedKeys } from '../../../src/observe/rejected-keys.js'
import { ReloadHistory } from '../../../src/observe/reload-history.js'
import { shownKey } from '../../../src/engine/log-key.js'
import { loadSettings } from '../../../src/settings.js'
import { MemoryStore } from '../../../src/store/memory/store.js'
import { applyAsync } from '../../../src/store/store.js'
import { ADMIN_TOKEN, adminBundle } from '../../helpers/admin.js'

const settings = loadSettings({
  FAIRVISOR_MODE: 'decision_service',
  FAIRVISOR_ADMIN_PORT: '0',
  FAIRVISOR_ADMIN_TOKEN: ADMIN_TOKEN,
  FAIRVISOR_WORKERS: '1',
})
const bundle = adminBundle(9)
const lines: Record<string, unknown>[] = []
const log = pino(
  { level: 'info' },
  new Writable({
    write(chunk: Buffer, _e, done) {
      lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>)
      done()
    },
  }),
)

async function serve(
  api: ReturnType<typeof adminApi>,
  store: MemoryStore,
  metrics = createMetrics(),
): Promise<{ url: string; l: Listener }> {
  const health = adminRoutes(() => bundle, store, 'open', metrics)
  const l = createListener({ settings, log, ...adminListener(health, api) })
  await new Promise<void>((r) => l.server.listen(0, '127.0.0.1', r))
  return { url: `http://127.0.0.1:${(l.server.address() as AddressInfo).port}`, l }
}

const call = async (url: string, init: RequestInit & { token?: string | null } = {}) => {
  const token = init.token === undefined ? ADMIN_TOKEN : init.token
  const res = await fetch(url, { ...init, headers: token === null ? {} : { authorization: `Bearer ${token}` } })
  return { status: res.status, headers: res.headers, body: (await res.json()) as Record<string, unknown> }
}

describe('the admin API on the admin listener', () => {
  const store = new MemoryStore({ maxBytes: 1 << 20 })
  const metrics = createMetrics()
  const keys = new RejectedKeys(100, 300_000, shownKey, Date.now())
  const history = new ReloadHistory()
  let url: string
  let l: Listener
  before(async () => {
    history.add({ result: 'applied', version: 9 }, Date.UTC(2026, 0, 1))
    const view = async () => ({ ...(await threadView(keys, metrics, Date.now())), reloads: history.list() })
    const api = adminApi({ token: ADMIN_TOKEN, bundle: () => bundle, store, failPolicy: 'open', settings, view, log, clock: Date.now })
    ;({ url, l } = await serve(api, store, metrics))
  })
  after(() => l.shutdown(1000))

  test('a missing or wrong token: 401, `www-authenticate: Bearer`, and nothing else, on any admin path and method', async () => {
    for (const token of [null, 'wrong', `${ADMIN_TOKEN}x`, ADMIN_TOKEN.slice(1)])
      for (const [path, method] of [
        ['/v1/admin/bundle', 'GET'],
        ['/v1/admin/counters?policy=api&rule=per_user&key=alice', 'DELETE'],
        ['/v1/admin/nothing-here', 'PUT'],
      ] as const) {
        const r = await call(`${url}${path}`, { token, method })
        assert.equal(r.status, 401, `${token} ${method} ${path}`)
        assert.deepEqual(r.body, { error: { code: 'admin_unauthorized', message: 'unauthorized' } })
        assert.equal(r.headers.get('www-authenticate'), 'Bearer')
        assert.equal(r.headers.get('cache-control'), 'no-store')
      }
    assert.equal(lines.filter((x) => x.event === 'admin_counter_reset').length, 0, 'nothing was reset')
  })

  test('/livez, /readyz and /metrics need no token; `/` is the status page hook', async () => {
    assert.equal((await fetch(`${url}/livez`)).status, 200)
    assert.equal((await fetch(`${url}/readyz`)).status, 200)
    assert.equal((await fetch(`${url}/metrics`)).status, 200)
  })

  test('GET bundle, stats and top', async () => {
    const b = await call(`${url}/v1/admin/bundle`)
    assert.equal(b.status, 200)
    assert.deepEqual([b.body.version, b.body.mode, b.body.workers], ['9', 'decision_service', 1])
    assert.deepEqual(b.body.reloads, [{ at: '2026-01-01T00:00:00.000Z', result: 'applied', version: '9' }])
    metrics.hot.decisions.inc('allow', 'all_rules_passed', 'api', 7)
    metrics.hot.decisions.inc('reject', 'token_bucket_exceeded', 'api', 2)
    const s = await call(`${url}/v1/admin/stats`)
    assert.deepEqual(s.body.decisions, { allow: 7, reject: 2, shadow_reject: 0 })
    assert.deepEqual(s.body.rejects_by_reason, { token_bucket_exceeded: 2 })
    assert.ok(Math.abs(Date.parse(s.body.at as string) - Date.now()) < 60_000)
    const rule = bundle.policies[0]!.rules[1]!
    const group = { policy: 'api', rule: 'per_key', reason: 'token_bucket_exceeded', source: rule }
    for (let i = 0; i < 2; i++) keys.record(group, 'sk-live-2', Date.now())
    const t = await call(`${url}/v1/admin/top?n=5`)
    assert.deepEqual(t.body, {
      window_seconds: 300,
      entries: [{ policy: 'api', rule: 'per_key', reason: 'token_bucket_exceeded', key: shortHash('sk-live-2'), count: 2, error: 0 }],
    })
  })

  test('counters: read, then DELETE with the key as top shows it; the reset logged with who asked, never the credential', async () => {
    const key = 'tb:per_key:sk-live-2'
    const limit = bundle.policies[0]!.rules[1]!.limit
    await applyAsync(store, [{ key, limit, cost: 1, shadow: false }], Date.now() / 1000)
    const shown = encodeURIComponent(shortHash('sk-live-2'))
    const got = await call(`${url}/v1/admin/counters?policy=api&rule=per_key&key=${shown}`)
    assert.equal(got.status, 200)
    assert.deepEqual(
      { ...got.body, reset_seconds: typeof got.body.reset_seconds },
      {
        policy: 'api',
        rule: 'per_key',
        key: shortHash('sk-live-2'),
        algorithm: 'token_bucket',
        limit: 1,
        remaining: 0,
        reset_seconds: 'number',
        in_flight: null,
      },
    )
    const del = await call(`${url}/v1/admin/counters?policy=api&rule=per_key&key=${shown}`, { method: 'DELETE' })
    assert.deepEqual(del.body, { reset: true, policy: 'api', rule: 'per_key', key: shortHash('sk-live-2') })
    assert.equal(store.has(key), false)
    const logged = lines.find((x) => x.event === 'admin_counter_reset')!
    assert.deepEqual(
      [logged.level, logged.policy, logged.rule, logged.key, logged.remote],
      [30, 'api', 'per_key', shortHash('sk-live-2'), '127.0.0.1'],
    )
    assert.doesNotMatch(JSON.stringify(lines), /sk-live-2/)
  })

  test('errors: JSON with a code of the catalogue', async () => {
    const cases: [string, string, number, string][] = [
      ['GET', '/v1/admin/counters?policy=api&rule=per_user', 400, 'admin_bad_request'],
      ['GET', '/v1/admin/counters?policy=api&rule=nope&key=a', 404, 'admin_unknown_rule'],
      ['DELETE', '/v1/admin/counters?policy=nope&rule=per_user&key=a', 404, 'admin_unknown_rule'],
      ['GET', `/v1/admin/counters?policy=api&rule=per_key&key=${shortHash('never-seen')}`, 404, 'admin_unknown_key'],
      ['GET', '/v1/admin/top?n=0', 400, 'admin_bad_request'],
      ['GET', '/v1/admin/nothing-here', 404, 'admin_not_found'],
      ['DELETE', '/v1/admin/bundle', 405, 'admin_method_not_allowed'],
      ['POST', '/v1/admin/counters?policy=api&rule=per_user&key=a', 405, 'admin_method_not_allowed'],
    ]
    for (const [method, path, status, code] of cases) {
      const r = await call(`${url}${path}`, { method })
      assert.equal(r.status, status, `${method} ${path}`)
      assert.equal((r.body.error as { code: string }).code, code, `${method} ${path}`)
      assert.equal(typeof (r.body.error as { message: unknown }).message, 'string')
    }
    const r = await call(`${url}/v1/admin/counters?policy=api&rule=per_user&key=a`, { method: 'PUT' })
    assert.equal(r.headers.get('allow'), 'GET, DELETE')
  })
})

test('without FAIRVISOR_ADMIN_TOKEN: /v1/admin/* is 404 admin_disabled, token or not', async () => {
  const store = new MemoryStore({ maxBytes: 1 << 20 })
  const { url, l } = await serve(adminDisabled, store)
  try {
    for (const token of [null, ADMIN_TOKEN]) {
      const r = await call(`${url}/v1/admin/bundle`, { token })
      assert.equal(r.status, 404)
      assert.equal((r.body.error as { code: string }).code, 'admin_disabled')
    }
    assert.equal((await fetch(`${url}/livez`)).status, 200)
  } finally {
    await l.shutdown(1000)
  }
})
