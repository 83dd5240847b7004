/**
 * JWT verification through the real gateway process: with an HMAC
 * secret, a local JWKS file or a JWKS URL configured, only verified tokens
 * yield jwt: values; a forged, expired or unsigned token leaves the claim
 * missing (the rule is skipped, fail-open) and never causes a 5xx.
 */
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { exportJWK, generateKeyPair, SignJWT } from 'jose'
import { CLI, ROOT, startBackend, startGateway, type Backend, type GatewayProcess } from '../helpers/processes.js'

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
  const cases: [Record<string, string>, RegExp][] = [
    [{ FAIRVISOR_JWT_HMAC_SECRET: 'short' }, /FAIRVISOR_JWT_HMAC_SECRET: must be at least 32 characters/],
    [{ FAIRVISOR_JWKS_FILE: join(dir, 'missing.json') }, /FAIRVISOR_JWKS_FILE: cannot read a JSON Web Key Set/],
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
