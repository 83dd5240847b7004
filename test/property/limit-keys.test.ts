/**
 * Properties of the limit keys a client could respell or repeat (docs/descriptors.md): a
 * `header:` key is the value of the lines named exactly so (any case, `_` never standing for
 * `-`), refused when they differ; `llm:api_key` never depends on a header the API of the path
 * does not read while one it reads is present.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import fc from 'fast-check'
import { AmbiguousRequest } from '../../src/errors.js'
import { compileDescriptor, mayBeMissing } from '../../src/request/descriptors.js'
import { RequestView } from '../../src/request/view.js'

const RUNS = { numRuns: 3000 }

/** Spellings of x-api-key and near misses: case, `_` for `-`, other names of the same length. */
const name = fc.constantFrom(
  'x-api-key',
  'X-Api-Key',
  'X-API-KEY',
  'x_api_key',
  'X_Api_Key',
  'x-api_key',
  'x-api-kez',
  'api-key',
  'authorization',
)
const value = fc.constantFrom('a', 'b', 'REAL', '', 'Bearer a', 'Bearer b')

function view(path: string, headers: [string, string][]): RequestView {
  return new RequestView({ method: 'POST', path, rawQuery: '', host: 'h', peer: '127.0.0.1', rawHeaders: headers.flat() }, undefined)
}

function outcome(f: () => string | undefined): string | undefined | 'ambiguous' {
  try {
    return f()
  } catch (err) {
    assert.ok(err instanceof AmbiguousRequest, String(err))
    return 'ambiguous'
  }
}

test('header:x_api_key reads exactly the lines named x-api-key in any case; two different values are ambiguous', () => {
  const d = compileDescriptor('header:x_api_key')
  assert.ok(d.ok)
  fc.assert(
    fc.property(fc.array(fc.tuple(name, value), { maxLength: 6 }), (headers) => {
      const lines = headers.filter(([k]) => k.toLowerCase() === 'x-api-key').map(([, v]) => v)
      const want = new Set(lines).size > 1 ? 'ambiguous' : lines[0] === '' ? undefined : lines[0]
      assert.equal(
        outcome(() => d.extract(view('/x', headers))),
        want,
      )
    }),
    RUNS,
  )
})

test('llm:api_key on an OpenAI path with a bearer token never depends on x-api-key or api-key', () => {
  const d = compileDescriptor('llm:api_key')
  assert.ok(d.ok)
  const junk = fc.array(fc.tuple(fc.constantFrom('x-api-key', 'api-key', 'X_Api_Key', 'Api-Key'), fc.string()), { maxLength: 4 })
  fc.assert(
    fc.property(fc.constantFrom('/v1/chat/completions', '/v1/responses', '/v1/embeddings'), junk, junk, (path, before, after) => {
      const k = outcome(() => d.extract(view(path, [...before, ['Authorization', 'Bearer sk-REAL'], ...after])))
      assert.equal(k, 'sk-REAL')
    }),
    RUNS,
  )
})

test('llm:api_key on any path and any headers is a string, missing, or AmbiguousRequest; never another error', () => {
  const d = compileDescriptor('llm:api_key')
  assert.ok(d.ok)
  const header = fc.tuple(
    fc.oneof(fc.constantFrom('authorization', 'Authorization', 'x-api-key', 'api-key', 'X_Api_Key'), fc.string()),
    fc.oneof(fc.string(), fc.constantFrom('Bearer ', 'bearer x', 'Bearer a,b', 'Basic x', ' , ')),
  )
  const path = fc.oneof(fc.constantFrom('/v1/messages', '/openai/x', '/models/y', '/v1/chat/completions', '/'), fc.string())
  fc.assert(
    fc.property(path, fc.array(header, { maxLength: 6 }), (p, headers) => {
      const k = outcome(() => d.extract(view(p, headers)))
      assert.ok(k === undefined || typeof k === 'string')
    }),
    RUNS,
  )
})

test("mayBeMissing (validate's fallback_limit warning) agrees with the extractors: a bare request has exactly the values it says every request has", () => {
  const keys = ['jwt:sub', 'header:x-api-key', 'query:tenant', 'descriptor:remote_address', 'llm:api_key', 'ua:bot', 'ua:bot_category']
  keys.push('ip:address', 'ip:country', 'ip:asn', 'ip:type', 'ip:tor')
  fc.assert(
    fc.property(fc.constantFrom('/x', '/v1/chat/completions', '/v1/messages'), fc.constantFrom(...keys), (path, key) => {
      const d = compileDescriptor(key)
      assert.ok(d.ok, key)
      const value = d.extract(view(path, [['user-agent', 'Mozilla/5.0 (X11; Linux x86_64) Firefox/130.0']]))
      assert.equal(value === undefined, mayBeMissing(key), `${key} on ${path}: ${value}`)
    }),
    { numRuns: 200 },
  )
})
