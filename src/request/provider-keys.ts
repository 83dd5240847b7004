/**
 * `llm:api_key` on the native paths of Gemini and Bedrock (docs/llm.md, Providers), whose
 * credentials are not in the headers api-key.ts reads for the other APIs:
 * - Gemini (`…/models/{model}:generateContent` and the other model methods): the key in
 *   `x-goog-api-key` or in the query (`?key=`), or an OAuth token (`Authorization: Bearer`,
 *   Vertex AI);
 * - Bedrock (`/model/{modelId}/converse`, …): the access key id of a SigV4 signature, from
 *   `Authorization: AWS4-HMAC-SHA256 Credential=AKID/date/region/bedrock/aws4_request, …`
 *   (or a presigned `X-Amz-Credential`), or a Bedrock API key (`Authorization: Bearer`).
 *   The id names the AWS identity that is billed; the signature changes on every request.
 * As in api-key.ts, one key sent in two places is one key; two different ones, or a header
 * repeated with two values, are refused (AmbiguousRequest) rather than keyed. undefined: the
 * path is neither API's, or none of these is present (api-key.ts then reads the usual
 * headers).
 */
import { AmbiguousRequest } from '../errors.js'
import { providerOfPath } from '../llm/providers/paths.js'
import { BEARER_SCHEME } from './raw-headers.js'
import type { RequestView } from './view.js'

const SIGV4 = /^\s*AWS4-HMAC-SHA256\s/
const CREDENTIAL = /Credential=([^/,\s]+)\//g

function bearer(v: RequestView): string | undefined {
  const raw = v.keyHeader('authorization')
  if (raw === undefined || !BEARER_SCHEME.test(raw)) return undefined
  const token = raw.trim().slice(6).trim()
  if (token.includes(',')) throw new AmbiguousRequest('the authorization header holds more than one credential')
  return token === '' ? undefined : token
}

/** The access key id of a SigV4 Authorization header (its signature's other parts hold commas, so that test is not used here). */
function accessKeyId(v: RequestView): string | undefined {
  const raw = v.keyHeader('authorization')
  if (raw === undefined || !SIGV4.test(raw)) return undefined
  const ids = [...raw.matchAll(CREDENTIAL)].map((m) => m[1]!)
  if (ids.length > 1) throw new AmbiguousRequest('the authorization header holds more than one credential')
  return ids[0]
}

/** The one value among the credentials found (undefined: none); AmbiguousRequest when they differ. */
function one(found: readonly [string, string | undefined][]): string | undefined {
  let key: string | undefined
  let from = ''
  for (const [name, value] of found) {
    if (value === undefined || value === '') continue
    if (key === undefined) {
      key = value
      from = name
    } else if (value !== key) throw new AmbiguousRequest(`the request carries different credentials in ${from} and ${name}`)
  }
  return key
}

export function providerKey(v: RequestView): string | undefined {
  const api = providerOfPath(v.path)
  if (api === 'gemini') {
    const header = v.keyHeader('x-goog-api-key')?.trim()
    if (header?.includes(',')) throw new AmbiguousRequest('the x-goog-api-key header holds more than one credential')
    return one([
      ['x-goog-api-key', header],
      ['the key query parameter', v.keyQuery('key')],
      ['authorization', bearer(v)],
    ])
  }
  if (api === 'bedrock') {
    return one([
      ['authorization', accessKeyId(v) ?? bearer(v)],
      ['X-Amz-Credential', v.keyQuery('X-Amz-Credential')?.split('/')[0]],
    ])
  }
  return undefined
}
