/**
 * `llm:api_key` on Gemini's and Bedrock's native paths (src/request/provider-keys.ts, through
 * api-key.ts): Gemini's key from x-goog-api-key, `?key=` or a Bearer token; Bedrock's SigV4
 * access key id (or a presigned X-Amz-Credential, or a Bearer API key); one key in two places
 * is one key, two different ones are refused; other paths read the usual headers.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { isSecretDescriptor, shortHash, urlForLog } from '../../../src/engine/log-key.js'
import { apiKey } from '../../../src/request/api-key.js'
import { providerKey } from '../../../src/request/provider-keys.js'
import { view, type Req } from '../../helpers/engine-harness.js'

const GEMINI = '/v1beta/models/gemini-2.5-flash:generateContent'
const BEDROCK = '/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/converse'
const sig = (akid: string, rest = ', SignedHeaders=host;x-amz-date, Signature=abcd'): string =>
  `AWS4-HMAC-SHA256 Credential=${akid}/20260101/us-east-1/bedrock/aws4_request${rest}`
const key = (r: Req): string | undefined => apiKey(view({ method: 'POST', ...r }))

test('Gemini: x-goog-api-key, ?key= or a Bearer token; the same key twice is one; two keys are refused', () => {
  assert.equal(key({ path: GEMINI, headers: { 'x-goog-api-key': ' AIza-1 ' } }), 'AIza-1')
  assert.equal(key({ path: GEMINI, query: 'key=AIza-2&alt=sse' }), 'AIza-2')
  assert.equal(key({ path: GEMINI, headers: { authorization: 'Bearer ya29.token' } }), 'ya29.token')
  assert.equal(key({ path: GEMINI, query: 'key=AIza-1', headers: { 'x-goog-api-key': 'AIza-1' } }), 'AIza-1')
  assert.throws(() => key({ path: GEMINI, query: 'key=AIza-1', headers: { 'x-goog-api-key': 'AIza-2' } }), /different credentials/)
  assert.throws(() => key({ path: GEMINI, query: 'key=a&key=b' }), /repeated/)
  assert.throws(() => key({ path: GEMINI, headers: { 'x-goog-api-key': ['a', 'b'] } }), /repeated/)
  assert.throws(() => key({ path: GEMINI, headers: { 'x-goog-api-key': 'a,b' } }), /more than one/)
  // None of Gemini's own: the usual headers, as on any path.
  assert.equal(key({ path: GEMINI, headers: { 'x-api-key': 'k' } }), 'k')
  assert.equal(key({ path: GEMINI }), undefined)
  // x-goog-api-key is Gemini's alone.
  assert.equal(key({ path: '/v1/chat/completions', headers: { 'x-goog-api-key': 'g', authorization: 'Bearer sk' } }), 'sk')
})

test('Bedrock: the access key id of a SigV4 signature, whatever the signature; a presigned credential; a Bearer API key', () => {
  assert.equal(key({ path: BEDROCK, headers: { authorization: sig('AKIAEXAMPLE1') } }), 'AKIAEXAMPLE1')
  assert.equal(
    key({ path: BEDROCK, headers: { authorization: sig('AKIAEXAMPLE1', ', SignedHeaders=host, Signature=ffff') } }),
    'AKIAEXAMPLE1',
  )
  assert.equal(key({ path: `${BEDROCK}-stream`, headers: { authorization: sig('ASIATEMP') } }), 'ASIATEMP')
  assert.equal(key({ path: BEDROCK, query: 'X-Amz-Credential=AKIAQ%2F20260101%2Fus-east-1%2Fbedrock%2Faws4_request' }), 'AKIAQ')
  assert.equal(key({ path: BEDROCK, headers: { authorization: 'Bearer ABSKQmVkcm9ja0FQSUtleQ==' } }), 'ABSKQmVkcm9ja0FQSUtleQ==')
  assert.throws(
    () =>
      key({
        path: BEDROCK,
        headers: { authorization: `${sig('AKIA1')}, AWS4-HMAC-SHA256 Credential=AKIA2/20260101/us-east-1/bedrock/aws4_request` },
      }),
    /more than one/,
  )
  assert.throws(
    () =>
      key({
        path: BEDROCK,
        headers: { authorization: sig('AKIA1') },
        query: 'X-Amz-Credential=AKIA2/20260101/us-east-1/bedrock/aws4_request',
      }),
    /different credentials/,
  )
  // A signature on another path is not an API key.
  assert.equal(key({ path: '/v1/chat/completions', headers: { authorization: sig('AKIA1') } }), undefined)
})

test('other paths: not the providers concern', () => {
  assert.equal(providerKey(view({ path: '/v1/messages', headers: { 'x-goog-api-key': 'g' } })), undefined)
  assert.equal(providerKey(view({ path: '/api/chat', headers: { authorization: 'Bearer t' } })), undefined)
})

test('a key in the query string never reaches a log line: logged targets show its short hash', () => {
  assert.equal(
    urlForLog('/v1beta/models/m:generateContent?alt=sse&key=AIza%2Fsecret'),
    `/v1beta/models/m:generateContent?alt=sse&key=${shortHash('AIza/secret')}`,
  )
  assert.equal(
    urlForLog('/model/m/converse?X-Amz-Credential=AKIA1%2Fx&X-Amz-Signature=ff&monkey=1'),
    `/model/m/converse?X-Amz-Credential=${shortHash('AKIA1/x')}&X-Amz-Signature=${shortHash('ff')}&monkey=1`,
  )
  assert.equal(urlForLog('/v1/chat/completions'), '/v1/chat/completions')
  assert.ok(isSecretDescriptor('header:x_goog_api_key') && isSecretDescriptor('query:key'))
})
