/**
 * Debug sessions (docs/behaviour.md §8) through the real gateway, in decision_service and
 * reverse_proxy mode: the signed cookie, its refusal paths, and the
 * X-Fairvisor-Debug-* headers only for requests that hold it.
 */
import assert from 'node:assert/strict'
import { createHmac } from 'node:crypto'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { startBackend, startGateway, type Backend, type GatewayProcess } from '../helpers/processes.js'

// At least 32 characters, as the gateway requires of a debug session secret.
const SECRET = 'debug-secret-for-tests-0123456789'

const BUNDLE = {
  bundle_version: 1,
  policies: [
    {
      id: 'api',
      spec: {
        selector: { pathPrefix: '/' },
        rules: [
          {
            name: 'per_user',
            limit_keys: ['header:x-user', 'query:tier'],
            algorithm: 'token_bucket',
            algorithm_config: { tokens_per_second: 0.01, burst: 1 },
          },
        ],
      },
    },
  ],
}

function writeBundle(doc: object): string {
  const file = join(mkdtempSync(join(tmpdir(), 'fv-debug-')), 'bundle.json')
  writeFileSync(file, JSON.stringify(doc))
  return file
}

function sign(expiry: string): string {
  return createHmac('sha256', SECRET).update(expiry).digest('base64url')
}

function debugHeaderNames(r: Response): string[] {
  return [...r.headers.keys()].filter(
    (k) => k.startsWith('x-fairvisor-debug') || k === 'x-fairvisor-decision' || k === 'x-fairvisor-mode' || k === 'x-fairvisor-latency-us',
  )
}

async function login(url: string): Promise<string> {
  const r = await fetch(`${url}/v1/debug/session`, { method: 'POST', headers: { 'x-fairvisor-debug-secret': SECRET } })
  assert.equal(r.status, 204)
  const cookie = r.headers.get('set-cookie') ?? ''
  return cookie.slice(0, cookie.indexOf(';'))
}

describe('debug sessions in decision_service mode', () => {
  let gw: GatewayProcess
  const decide = (headers: Record<string, string>, uri = '/orders?tier=gold') =>
    fetch(`${gw.url}/v1/decision`, { method: 'POST', headers: { 'x-original-method': 'GET', 'x-original-uri': uri, ...headers } })
  before(async () => {
    gw = await startGateway({
      FAIRVISOR_MODE: 'decision_service',
      FAIRVISOR_CONFIG_FILE: writeBundle(BUNDLE),
      FAIRVISOR_DEBUG_SESSION_SECRET: SECRET,
    })
  })
  after(() => gw?.stop())

  test('the right secret gets 204 and a signed cookie with the documented attributes', async () => {
    const before = Math.floor(Date.now() / 1000)
    const r = await fetch(`${gw.url}/v1/debug/session`, { method: 'POST', headers: { 'x-fairvisor-debug-secret': SECRET } })
    assert.equal(r.status, 204)
    assert.equal(await r.text(), '')
    const m = /^fv_dbg=(\d+)\.([A-Za-z0-9_-]+); Path=\/; Max-Age=900; HttpOnly; Secure; SameSite=Strict$/.exec(
      r.headers.get('set-cookie') ?? '',
    )
    assert.ok(m, r.headers.get('set-cookie') ?? 'no set-cookie')
    const expiry = Number(m[1])
    assert.ok(expiry >= before + 900 && expiry <= before + 902, `expiry ${expiry}`)
    assert.equal(m[2], sign(m[1]!))
  })

  test('a wrong or missing secret is 403 debug_secret_invalid; other methods 405', async () => {
    for (const headers of [{ 'x-fairvisor-debug-secret': 'wrong' }, { 'x-fairvisor-debug-secret': `${SECRET}x` }, {}] as Record<
      string,
      string
    >[]) {
      const r = await fetch(`${gw.url}/v1/debug/session`, { method: 'POST', headers })
      assert.equal(r.status, 403)
      assert.deepEqual(await r.json(), { error: 'debug_secret_invalid' })
      assert.equal(r.headers.get('set-cookie'), null)
    }
    for (const path of ['/v1/debug/session', '/v1/debug/logout']) {
      const r = await fetch(`${gw.url}${path}`, { headers: { 'x-fairvisor-debug-secret': SECRET } })
      assert.equal(r.status, 405, path)
      assert.equal(r.headers.get('allow'), 'POST')
    }
  })

  test('with the cookie an allow and a 429 carry the debug headers; without it none', async () => {
    const cookie = await login(gw.url)
    const allow = await decide({ 'x-user': 'dbg', cookie: `theme=dark; ${cookie}` })
    assert.equal(allow.status, 200)
    assert.equal(allow.headers.get('x-fairvisor-decision'), 'allow')
    assert.equal(allow.headers.get('x-fairvisor-debug-decision'), 'allow')
    assert.equal(allow.headers.get('x-fairvisor-debug-mode'), 'enforce')
    assert.equal(allow.headers.get('x-fairvisor-debug-reason'), 'all_rules_passed')
    assert.equal(allow.headers.get('x-fairvisor-reason'), 'all_rules_passed')
    assert.equal(allow.headers.get('x-fairvisor-debug-matched-policies'), 'api')
    assert.match(allow.headers.get('x-fairvisor-debug-latency-us') ?? '', /^\d+$/)
    // Descriptors sorted by key.
    assert.equal(allow.headers.get('x-fairvisor-debug-descriptor-1-key'), 'header:x-user')
    assert.equal(allow.headers.get('x-fairvisor-debug-descriptor-1-value'), 'dbg')
    assert.equal(allow.headers.get('x-fairvisor-debug-descriptor-2-key'), 'query:tier')
    assert.equal(allow.headers.get('x-fairvisor-debug-descriptor-2-value'), 'gold')

    const reject = await decide({ 'x-user': 'dbg', cookie })
    assert.equal(reject.status, 429)
    assert.equal(reject.headers.get('x-fairvisor-debug-policy'), 'api')
    assert.equal(reject.headers.get('x-fairvisor-debug-rule'), 'per_user')
    assert.equal(reject.headers.get('x-fairvisor-debug-decision'), 'reject')
    assert.equal(reject.headers.get('x-fairvisor-debug-mode'), 'enforce')
    assert.equal(reject.headers.get('x-fairvisor-debug-reason'), 'token_bucket_exceeded')
    assert.equal(reject.headers.get('x-fairvisor-reason'), 'token_bucket_exceeded', 'sent once, not twice')

    const plain = await decide({ 'x-user': 'dbg' })
    assert.equal(plain.status, 429)
    assert.deepEqual(debugHeaderNames(plain), [])
    const plainAllow = await decide({ 'x-user': 'dbg2' })
    assert.equal(plainAllow.status, 200)
    assert.deepEqual(debugHeaderNames(plainAllow), [])
    assert.equal(plainAllow.headers.get('x-fairvisor-reason'), null)
  })

  test('a long descriptor value is cut at 256 characters', async () => {
    const cookie = await login(gw.url)
    const r = await decide({ 'x-user': 'u'.repeat(600), cookie })
    assert.equal(r.headers.get('x-fairvisor-debug-descriptor-1-value'), 'u'.repeat(256))
  })

  test('forged, tampered and expired cookies are ignored', async () => {
    const soon = String(Math.floor(Date.now() / 1000) + 600)
    const past = String(Math.floor(Date.now() / 1000) - 5)
    for (const cookie of [
      `fv_dbg=${soon}.${sign(soon).slice(0, -2)}AA`,
      `fv_dbg=${Number(soon) + 1}.${sign(soon)}`,
      `fv_dbg=${past}.${sign(past)}`,
      `fv_dbg=${soon}`,
      `fv_dbg=.${sign('')}`,
    ]) {
      const r = await decide({ 'x-user': `forged-${cookie.length}`, cookie })
      assert.deepEqual(debugHeaderNames(r), [], cookie)
    }
    // A cookie the test signs itself with the right secret is valid: the format is what docs/behaviour.md §8 says.
    const ok = await decide({ 'x-user': 'self-signed', cookie: `fv_dbg=${soon}.${sign(soon)}` })
    assert.equal(ok.headers.get('x-fairvisor-debug-decision'), 'allow')
  })

  test('logout is 204 and clears the cookie', async () => {
    const r = await fetch(`${gw.url}/v1/debug/logout`, { method: 'POST' })
    assert.equal(r.status, 204)
    assert.match(r.headers.get('set-cookie') ?? '', /^fv_dbg=; Path=\/; Max-Age=0; HttpOnly; Secure; SameSite=Strict$/)
  })
})

describe('debug sessions without a secret', () => {
  let gw: GatewayProcess
  before(async () => {
    gw = await startGateway({ FAIRVISOR_MODE: 'decision_service', FAIRVISOR_CONFIG_FILE: writeBundle(BUNDLE) })
  })
  after(() => gw?.stop())

  test('the endpoints are 404 and a cookie signed with any secret does nothing', async () => {
    assert.equal(
      (await fetch(`${gw.url}/v1/debug/session`, { method: 'POST', headers: { 'x-fairvisor-debug-secret': SECRET } })).status,
      404,
    )
    assert.equal((await fetch(`${gw.url}/v1/debug/logout`, { method: 'POST' })).status, 404)
    const soon = String(Math.floor(Date.now() / 1000) + 600)
    const r = await fetch(`${gw.url}/v1/decision`, {
      method: 'POST',
      headers: { 'x-original-uri': '/a', 'x-user': 'x', cookie: `fv_dbg=${soon}.${sign(soon)}` },
    })
    assert.equal(r.status, 200)
    assert.deepEqual(debugHeaderNames(r), [])
  })
})

describe('debug sessions in reverse_proxy mode', () => {
  let gw: GatewayProcess
  let backend: Backend
  before(async () => {
    backend = await startBackend((_q, s) => {
      s.setHeader('x-backend', 'yes')
      s.end('from backend')
    })
    gw = await startGateway({
      FAIRVISOR_BACKEND_URL: backend.url,
      FAIRVISOR_CONFIG_FILE: writeBundle(BUNDLE),
      FAIRVISOR_DEBUG_SESSION_SECRET: SECRET,
      // Reasons hidden from ordinary clients; a debug session still sees them.
      FAIRVISOR_EXPOSE_REASON: 'false',
    })
  })
  after(async () => {
    await gw?.stop()
    await backend?.close()
  })

  test('a proxied allow and a 429 carry the debug headers only with the cookie', async () => {
    const cookie = await login(gw.url)
    const allow = await fetch(`${gw.url}/shop?tier=silver`, { headers: { 'x-user': 'p1', cookie } })
    assert.equal(allow.status, 200)
    assert.equal(await allow.text(), 'from backend')
    assert.equal(allow.headers.get('x-backend'), 'yes')
    assert.equal(allow.headers.get('x-fairvisor-debug-decision'), 'allow')
    assert.equal(allow.headers.get('x-fairvisor-debug-policy'), 'api')
    assert.equal(allow.headers.get('ratelimit-remaining'), '0')

    const reject = await fetch(`${gw.url}/shop?tier=silver`, { headers: { 'x-user': 'p1', cookie } })
    assert.equal(reject.status, 429)
    assert.equal(reject.headers.get('x-fairvisor-debug-rule'), 'per_user')
    assert.equal(reject.headers.get('x-fairvisor-debug-decision'), 'reject')
    assert.equal(reject.headers.get('x-fairvisor-reason'), 'token_bucket_exceeded', 'debug sessions always see the reason')

    const plain = await fetch(`${gw.url}/shop?tier=silver`, { headers: { 'x-user': 'p1' } })
    assert.equal(plain.status, 429)
    assert.equal(plain.headers.get('x-fairvisor-reason'), null, 'hidden without a session when EXPOSE_REASON=false')
    assert.deepEqual(debugHeaderNames(plain), [])
    const plainAllow = await fetch(`${gw.url}/shop?tier=silver`, { headers: { 'x-user': 'p2' } })
    assert.equal(plainAllow.status, 200)
    assert.deepEqual(debugHeaderNames(plainAllow), [])
  })
})
