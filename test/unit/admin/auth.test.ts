/** The admin API's bearer token check (src/admin/auth.ts). */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { bearerOf, tokenCheck } from '../../../src/admin/auth.js'

const TOKEN = 'a-long-enough-admin-token'

test('only `Bearer <the token>` passes; the scheme in any case, spaces around', () => {
  const ok = tokenCheck(TOKEN)
  for (const h of [`Bearer ${TOKEN}`, `bearer ${TOKEN}`, `BEARER  ${TOKEN} `]) assert.equal(ok(h), true, h)
  for (const h of [
    undefined,
    '',
    'Bearer',
    'Bearer ',
    TOKEN,
    `Basic ${TOKEN}`,
    `Bearer ${TOKEN}x`,
    `Bearer ${TOKEN.slice(0, -1)}`,
    `Bearer ${TOKEN} extra`,
    `Bearer ${TOKEN.toUpperCase()}`,
  ])
    assert.equal(ok(h), false, String(h))
})

test('an empty token presented never matches, not even the digest of nothing', () => {
  assert.equal(tokenCheck('')('Bearer '), false)
  assert.equal(tokenCheck('')(undefined), false)
})

test('bearerOf', () => {
  assert.equal(bearerOf('Bearer abc'), 'abc')
  assert.equal(bearerOf('Token abc'), undefined)
})
