/**
 * JWT verification through the real gateway process: with an HMAC
 * secret, a local JWKS file or a JWKS URL configured, only verified tokens
 * yield jwt: values; a forged, expired or unsigned token leaves the claim
 * missing (the rule is skipped, fail-open) and never causes a 5xx. Such a
 * token is visible: counted by reason in fairvisor_jwt_rejected_total (summed
 * over worker threads), logged with its reason, and named to a debug session.
 */
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { createServer, request } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { exportJWK, generateKeyPair, SignJWT } from 'jose'
import { CLI, metricValue, ROOT, startBackend, startGateway, type Backend, type GatewayProcess } from '../helpers/processes.js'

const SECRET = 'a-test-secret-that-is-at-least-32-characters-long'
const dir = mkdtempSync(join(tmpdir(), 'fv-jwt-'))
const bundleFile = join(dir, 'bundle.json')
writeFileSync(
  bundleFile,
  JSON.stringify({
    bundle_version: 1,
    policies: [
      {
        id: 'per_user',
        spec: {
          selector: { pathPrefix: '/' },
          rules: [
            {
              name: 'per_sub',
              limit_keys: ['jwt:sub'],
              algorithm: 'token_bucket',
              algorithm_config: { tokens_per_second: 0.001, burst: 2 },
            },
          ],
        },
      },
    ],
  }),
)

const hmac = (claims: Record<string, unknown>, secret = SECRET) =>
  new SignJWT(claims).setProtectedHeader({ alg: 'HS256' }).setIssuedAt().sign(new TextEncoder().encode(secret))

async function statuses(gw: GatewayProcess, token: string, n: number): Promise<number[]> {
  const out: number[] = []
  for (let i = 0; i < n; i++) {
    const r = await fetch(`${gw.url}/x`, { headers: { authorization: `Bearer ${token}` } })
    await r.arrayBuffer()
    out.push(r.status)
  }
  return out
}

function unsigned(claims: Record<string, unknown>): string {
  const b = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url')
  return `${b({ alg: 'none' })}.${b(claims)}.`
}

describe('HMAC secret', () => {
  let backend: Backend
  let gw: GatewayProcess
  before(async () => {
    backend = await startBackend()
    gw = await startGateway({ FAIRVISOR_BACKEND_URL: backend.url, FAIRVISOR_CONFIG_FILE: bundleFile, FAIRVISOR_JWT_HMAC_SECRET: SECRET })
  })
  after(async () => {
    await gw.stop()
    await backend.close()
  })

  test('a verified token is limited on its sub claim', async () => {
    assert.deepEqual(await statuses(gw, await hmac({ sub: 'alice' }), 3), [200, 200, 429])
  })

  test('a token signed with another secret, an unsigned one and an expired one have no claims (rule skipped)', async () => {
    const forged = await hmac({ sub: 'mallory' }, 'another-secret-that-is-also-at-least-32-chars')
    assert.deepEqual(await statuses(gw, forged, 4), [200, 200, 200, 200])
    assert.deepEqual(await statuses(gw, unsigned({ sub: 'mallory' }), 4), [200, 200, 200, 200])
    const expired = await new SignJWT({ sub: 'mallory' })
      .setProtectedHeader({ alg: 'HS256' })
      .setExpirationTime(Math.floor(Date.now() / 1000) - 60)
      .sign(new TextEncoder().encode(SECRET))
    assert.deepEqual(await statuses(gw, expired, 4), [200, 200, 200, 200])
    const metrics = await (await fetch(`${gw.url}/metrics`)).text()
    assert.match(metrics, /fairvisor_descriptor_missing_total\{key="jwt:sub"\} 12/)
  })
})

const REASONS = ['signature', 'expired', 'not_before', 'malformed', 'unknown_kid', 'jwks_unavailable']
const DEBUG_SECRET = 'debug-secret-for-tests-0123456789'

/** One request on a connection of its own (so that, with worker threads, requests spread over the workers). */
function once(port: number, headers: Record<string, string>): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path: '/x', headers, agent: false }, (res) => {
      res.resume()
      res.on('end', () => resolve(res.statusCode!))
    })
    req.on('error', reject)
    req.end()
  })
}

describe('a token that fails verification is counted, logged with its reason and shown to a debug session', () => {
  let backend: Backend
  let gw: GatewayProcess
  before(async () => {
    backend = await startBackend()
    gw = await startGateway({
      FAIRVISOR_BACKEND_URL: backend.url,
      FAIRVISOR_CONFIG_FILE: bundleFile,
      FAIRVISOR_JWT_HMAC_SECRET: SECRET,
      FAIRVISOR_DEBUG_SESSION_SECRET: DEBUG_SECRET,
    })
  })
  after(async () => {
    await gw.stop()
    await backend.close()
  })

  test('every reason is exported at 0 before any token', async () => {
    for (const reason of REASONS) assert.equal(await metricValue(gw, 'fairvisor_jwt_rejected_total', `reason="${reason}"`), 0, reason)
  })

  test('a forged token: counted per request as signature, one warn line with the reason, not one per request', async () => {
    const forged = await hmac({ sub: 'paid-user' }, 'another-secret-that-is-also-at-least-32-chars')
    assert.deepEqual(await statuses(gw, forged, 5), [200, 200, 200, 200, 200])
    assert.equal(await metricValue(gw, 'fairvisor_jwt_rejected_total', 'reason="signature"'), 5)
    const line = await gw.waitForLog((l) => l.event === 'jwt_rejected' && l.reason === 'signature')
    assert.equal(line.level, 'warn')
    assert.equal(line.requests, 1, 'the first one is logged at once')
    assert.match(String(line.detail), /signature/)
    assert.equal(JSON.stringify(line).includes(forged), false, 'the token itself is never logged')
    const expired = await new SignJWT({ sub: 'paid-user' })
      .setProtectedHeader({ alg: 'HS256' })
      .setExpirationTime(Math.floor(Date.now() / 1000) - 60)
      .sign(new TextEncoder().encode(SECRET))
    await statuses(gw, expired, 2)
    assert.equal(await metricValue(gw, 'fairvisor_jwt_rejected_total', 'reason="expired"'), 2)
    await gw.waitForLog((l) => l.event === 'jwt_rejected' && l.reason === 'expired')
    assert.equal(
      gw.logs.filter((l) => l.event === 'jwt_rejected' && l.reason === 'signature').length,
      1,
      'within 10 s: one line per reason',
    )
    assert.equal(await metricValue(gw, 'fairvisor_jwt_rejected_total', 'reason="malformed"'), 0)
  })

  test('a debug session is told why the token gave no claims', async () => {
    const login = await fetch(`${gw.url}/v1/debug/session`, { method: 'POST', headers: { 'x-fairvisor-debug-secret': DEBUG_SECRET } })
    const cookie = (login.headers.get('set-cookie') ?? '').split(';')[0]!
    const forged = await hmac({ sub: 'someone' }, 'another-secret-that-is-also-at-least-32-chars')
    const r = await fetch(`${gw.url}/x`, { headers: { authorization: `Bearer ${forged}`, cookie } })
    assert.equal(r.status, 200)
    assert.equal(r.headers.get('x-fairvisor-debug-jwt-rejected'), 'signature')
    const good = await fetch(`${gw.url}/x`, { headers: { authorization: `Bearer ${await hmac({ sub: 'someone' })}`, cookie } })
    assert.equal(good.headers.get('x-fairvisor-debug-jwt-rejected'), null)
    assert.equal(good.headers.get('x-fairvisor-debug-descriptor-1-key'), 'jwt:sub')
    const plain = await fetch(`${gw.url}/x`, { headers: { authorization: `Bearer ${forged}` } })
    assert.equal(plain.headers.get('x-fairvisor-debug-jwt-rejected'), null, 'only a session holder sees it')
  })
})

describe('with two worker threads, fairvisor_jwt_rejected_total is the sum over both', () => {
  let backend: Backend
  let gw: GatewayProcess
  before(async () => {
    backend = await startBackend()
    gw = await startGateway(
      { FAIRVISOR_BACKEND_URL: backend.url, FAIRVISOR_CONFIG_FILE: bundleFile, FAIRVISOR_JWT_HMAC_SECRET: SECRET, FAIRVISOR_WORKERS: '2' },
      { timeoutMs: 30_000 },
    )
  })
  after(async () => {
    await gw.stop()
    await backend.close()
  })

  test('forged tokens on connections of their own reach both workers; the scrape counts every one', async () => {
    const forged = await hmac({ sub: 'x' }, 'another-secret-that-is-also-at-least-32-chars')
    const workers = () => new Set(gw.logs.filter((l) => l.event === 'jwt_rejected').map((l) => l.worker))
    let sent = 0
    // Each worker logs its first rejected token at once: send until both have (bounded).
    while (workers().size < 2 && sent < 400) {
      assert.equal(await once(gw.port, { authorization: `Bearer ${forged}` }), 200)
      sent++
    }
    assert.equal(workers().size, 2, `both workers rejected a token within ${sent} requests`)
    assert.equal(await metricValue(gw, 'fairvisor_jwt_rejected_total', 'reason="signature"'), sent)
    assert.equal(await metricValue(gw, 'fairvisor_jwt_rejected_total', 'reason="expired"'), 0)
  })
})

describe('JWKS', () => {
  let backend: Backend
  let token: string
  let jwksFile: string
  const jwksServer = createServer()
  before(async () => {
    backend = await startBackend()
    const { publicKey, privateKey } = await generateKeyPair('RS256')
    const jwk = { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' }
    jwksFile = join(dir, 'jwks.json')
    writeFileSync(jwksFile, JSON.stringify({ keys: [jwk] }))
    jwksServer.on('request', (_req, res) => res.end(JSON.stringify({ keys: [jwk] })))
    await new Promise<void>((r) => jwksServer.listen(0, '127.0.0.1', r))
    token = await new SignJWT({ sub: 'bob' }).setProtectedHeader({ alg: 'RS256', kid: 'k1' }).sign(privateKey)
  })
  after(async () => {
    jwksServer.close()
    await backend.close()
  })

  for (const source of ['file', 'url'] as const) {
    test(`a token signed by a key of the JWKS ${source} is limited on its sub claim; an HMAC token is not`, async () => {
      const env =
        source === 'file'
          ? { FAIRVISOR_JWKS_FILE: jwksFile }
          : { FAIRVISOR_JWKS_URL: `http://127.0.0.1:${(jwksServer.address() as AddressInfo).port}/jwks.json` }
      const gw = await startGateway({ FAIRVISOR_BACKEND_URL: backend.url, FAIRVISOR_CONFIG_FILE: bundleFile, ...env })
      try {
        assert.deepEqual(await statuses(gw, token, 3), [200, 200, 429])
        assert.deepEqual(await statuses(gw, await hmac({ sub: 'eve' }), 3), [200, 200, 200])
      } finally {
        await gw.stop()
      }
    })
  }
})

describe('bad JWT key settings stop start-up with exit 2', () => {
  // jose is loaded with the first token: what its key set needs is checked at start-up all the same.
  const notKeys = join(dir, 'not-keys.json')
  writeFileSync(notKeys, JSON.stringify({ keys: ['k1'] }))
  const cases: [Record<string, string>, RegExp][] = [
    [{ FAIRVISOR_JWT_HMAC_SECRET: 'short' }, /FAIRVISOR_JWT_HMAC_SECRET: must be at least 32 characters/],
    [{ FAIRVISOR_JWKS_FILE: join(dir, 'missing.json') }, /FAIRVISOR_JWKS_FILE: cannot read a JSON Web Key Set/],
    [{ FAIRVISOR_JWKS_FILE: notKeys }, /FAIRVISOR_JWKS_FILE: .* must hold a JSON object with a "keys" array of JSON Web Key objects/],
    [{ FAIRVISOR_JWKS_URL: 'ftp://x' }, /FAIRVISOR_JWKS_URL: must be an http\(s\) URL/],
    [
      { FAIRVISOR_JWT_HMAC_SECRET: SECRET, FAIRVISOR_JWKS_URL: 'http://127.0.0.1:1/' },
      /FAIRVISOR_JWKS_URL: cannot be combined with FAIRVISOR_JWT_HMAC_SECRET/,
    ],
  ]
  for (const [env, message] of cases) {
    test(Object.keys(env).join(' + '), () => {
      const r = spawnSync(process.execPath, [CLI], {
        cwd: ROOT,
        env: {
          PATH: process.env.PATH,
          FAIRVISOR_PORT: '0',
          FAIRVISOR_HOST: '127.0.0.1',
          FAIRVISOR_BACKEND_URL: 'http://127.0.0.1:1',
          FAIRVISOR_LOG_LEVEL: 'silent',
          ...env,
        },
        encoding: 'utf8',
        timeout: 10_000,
      })
      assert.equal(r.status, 2)
      assert.match(r.stderr, message)
      assert.equal(r.stderr.trim().split('\n').length, 1)
    })
  }
})
