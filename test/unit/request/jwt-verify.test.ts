/** Why a token does not verify (request/jwt-verify.ts), with real tokens, a real key set and a real JWKS server. */
import assert from 'node:assert/strict'
import { createHmac } from 'node:crypto'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { exportJWK, generateKeyPair, SignJWT } from 'jose'
import { createJwtVerifier, type JwtResult, rejectReason } from '../../../src/request/jwt-verify.js'

const SECRET = 'a-test-secret-that-is-at-least-32-characters-long'
const NOW = Date.UTC(2026, 0, 1) // the verifier is given its time: tokens are checked at it
const nowS = NOW / 1000
const b64 = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url')
const hmac = (claims: Record<string, unknown>, secret = SECRET, alg = 'HS256') =>
  new SignJWT(claims).setProtectedHeader({ alg }).sign(new TextEncoder().encode(secret))
const signed = (headerAndPayload: string) =>
  `${headerAndPayload}.${createHmac('sha256', SECRET).update(headerAndPayload).digest('base64url')}`
const reason = (r: JwtResult) => (r.claims === null ? r.rejected : 'verified')

describe('HMAC secret: each failure named', () => {
  const v = createJwtVerifier({ jwtHmacSecret: SECRET, jwksFile: undefined, jwksUrl: undefined })!

  test('a good token verifies; a forged, expired, early, unsigned or broken one says why', async () => {
    assert.deepEqual(await v.verify(await hmac({ sub: 'ann', exp: nowS + 60 }), NOW), { claims: { sub: 'ann', exp: nowS + 60 } })
    const cases: [string, string][] = [
      [await hmac({ sub: 'mallory' }, 'another-secret-that-is-also-at-least-32-chars'), 'signature'],
      [`${b64({ alg: 'none' })}.${b64({ sub: 'mallory' })}.`, 'signature'],
      [await hmac({ sub: 'ann', exp: nowS - 1 }), 'expired'],
      [await hmac({ sub: 'ann', nbf: nowS + 3600 }), 'not_before'],
      [await hmac({ sub: 'ann', exp: 'tomorrow' }), 'malformed'],
      ['not-a-jwt', 'malformed'],
      // Signed right, but its payload is not JSON: the signature is checked first.
      [signed(`${b64({ alg: 'HS256' })}.bm90IGpzb24`), 'malformed'],
      [`${b64({ alg: 'HS256' })}.bm90IGpzb24.c2ln`, 'signature'],
    ]
    for (const [token, why] of cases) assert.equal(reason(await v.verify(token, NOW)), why, token)
  })

  test('a failed token keeps its reason while it is remembered, and says why in words for the log', async () => {
    const forged = await hmac({ sub: 'x' }, 'another-secret-that-is-also-at-least-32-chars')
    const first = await v.verify(forged, NOW)
    assert.equal(await v.verify(forged, NOW + 1000), first, 'the second look-up is the cache')
    assert.ok(first.claims === null && /signature/.test(first.detail), JSON.stringify(first))
  })
})

describe('JWKS: keys not in the set, and a set that cannot be fetched', () => {
  let file = ''
  let token = ''
  let stranger = ''
  let server: Server
  let served = 200
  before(async () => {
    const { publicKey, privateKey } = await generateKeyPair('RS256')
    const jwk = { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' }
    file = join(mkdtempSync(join(tmpdir(), 'fv-jwks-')), 'jwks.json')
    writeFileSync(file, JSON.stringify({ keys: [jwk] }))
    token = await new SignJWT({ sub: 'bob' }).setProtectedHeader({ alg: 'RS256', kid: 'k1' }).sign(privateKey)
    stranger = await new SignJWT({ sub: 'bob' }).setProtectedHeader({ alg: 'RS256', kid: 'k9' }).sign(privateKey)
    server = createServer((_q, s) => {
      s.statusCode = served
      s.end(JSON.stringify({ keys: [jwk] }))
    })
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  })
  after(() => server.close())

  test('file: an unknown kid is unknown_kid; an HMAC token is a signature failure', async () => {
    const v = createJwtVerifier({ jwtHmacSecret: undefined, jwksFile: file, jwksUrl: undefined })!
    assert.equal(reason(await v.verify(token, NOW)), 'verified')
    assert.equal(reason(await v.verify(stranger, NOW)), 'unknown_kid')
    assert.equal(reason(await v.verify(await hmac({ sub: 'eve' }), NOW)), 'signature')
  })

  test('URL: a set answered 500, or no server at all, is jwks_unavailable', async () => {
    served = 500
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/jwks.json`
    const v = createJwtVerifier({ jwtHmacSecret: undefined, jwksFile: undefined, jwksUrl: url })!
    assert.equal(reason(await v.verify(token, NOW)), 'jwks_unavailable')
    const closed = createServer()
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r))
    const port = (closed.address() as AddressInfo).port
    await new Promise<void>((r) => closed.close(() => r()))
    const none = createJwtVerifier({ jwtHmacSecret: undefined, jwksFile: undefined, jwksUrl: `http://127.0.0.1:${port}/` })!
    assert.equal(reason(await none.verify(token, NOW)), 'jwks_unavailable')
    served = 200
    const ok = createJwtVerifier({ jwtHmacSecret: undefined, jwksFile: undefined, jwksUrl: url })!
    assert.equal(reason(await ok.verify(token, NOW)), 'verified')
    assert.equal(reason(await ok.verify(stranger, NOW)), 'unknown_kid')
  })
})

test('an error that is not jose’s: the fetch of a remote set failing, else a malformed token', () => {
  assert.equal(rejectReason(new TypeError('fetch failed'), true), 'jwks_unavailable')
  assert.equal(rejectReason(new TypeError('Invalid input'), false), 'malformed')
  assert.equal(rejectReason({ code: 'ERR_JWT_CLAIM_VALIDATION_FAILED', claim: 'nbf', reason: 'invalid' }, false), 'malformed')
})
