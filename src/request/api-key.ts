/**
 * `llm:api_key` (docs/behaviour.md §3): the credential the upstream API bills, so that a header
 * the API ignores can never be the key. A client that sends `Authorization: Bearer sk-REAL` and
 * a fresh `x-api-key` on every call must meet REAL's bucket: OpenAI reads only the bearer token.
 *
 * Which headers an API reads is known by the request path:
 * - Azure OpenAI (`/openai/…`) and Azure AI inference (`/models/…`): `api-key` and the bearer
 *   token (Entra ID);
 * - Anthropic (`…/messages`, `…/messages/…`, `…/complete`): `x-api-key` and the bearer token
 *   (OAuth and auth tokens);
 * - OpenAI (`…/chat/completions`, `…/completions`, `…/responses`, `…/embeddings`,
 *   `…/moderations`, `…/images/…`, `…/audio/…`, `…/realtime`): the bearer token, which is also
 *   what the OpenAI-compatible servers read first (LiteLLM, vLLM, llama.cpp server);
 * - any other path: all three, since the API is not known.
 *
 * The key is the one value those headers hold (the same key sent in two of them is one key).
 * When they hold different values, or one of them is repeated with different values (or joined
 * by a proxy into `a,b`: no key holds a comma), the request is refused (AmbiguousRequest) rather
 * than keyed: the APIs do not say which they bill when given two (Anthropic-compatible servers
 * differ), and keying on the combination would give a client a fresh bucket for every junk value
 * beside its real key. Only when none of the headers the API reads is present are the others
 * read (OpenAI-compatible servers such as LiteLLM accept `x-api-key` and `api-key` too), under
 * the same rule. The value is the bare key. Gemini's and Bedrock's native paths read their own
 * credentials first (provider-keys.ts).
 */
import { AmbiguousRequest } from '../errors.js'
import { providerKey } from './provider-keys.js'
import { BEARER_SCHEME } from './raw-headers.js'
import type { RequestView } from './view.js'

const BEARER = 1
const X_API_KEY = 2
const API_KEY = 4
const ALL = BEARER | X_API_KEY | API_KEY

const OPENAI = /\/(?:completions|responses|embeddings|moderations|realtime)(?:\/|$)|\/(?:images|audio)\//

/**
 * The credential headers the API of `path` reads (a mask of BEARER, X_API_KEY, API_KEY). String
 * tests first: this runs on every request a rule keyed on llm:api_key sees.
 */
export function credentialsRead(path: string): number {
  if (path.startsWith('/openai/') || path.startsWith('/models/')) return API_KEY | BEARER
  if (path.endsWith('/messages') || path.endsWith('/complete') || path.includes('/messages/')) return X_API_KEY | BEARER
  if (path.endsWith('/chat/completions') || OPENAI.test(path)) return BEARER
  return ALL
}

const NAMES: readonly [number, string][] = [
  [BEARER, 'authorization'],
  [X_API_KEY, 'x-api-key'],
  [API_KEY, 'api-key'],
]

/** The credential one header carries (undefined: none); a value a proxy joined from two lines is ambiguous. */
function credential(v: RequestView, source: number, name: string): string | undefined {
  const raw = v.keyHeader(name)
  if (raw === undefined) return undefined
  let value: string
  if (source === BEARER) {
    // Another scheme (Basic, Digest, AWS SigV4) is not an API key.
    if (!BEARER_SCHEME.test(raw)) return undefined
    value = raw.trim().slice(6).trim()
  } else value = raw.trim()
  if (value === '') return undefined
  // A bearer token (RFC 6750 b64token) and an API key never hold a comma: a value with one is two
  // lines joined (Envoy's ext_authz header map, nginx's $http_, Node's req.headers).
  if (value.includes(',')) throw new AmbiguousRequest(`the ${name} header holds more than one credential`)
  return value
}

/** The one credential the headers of `mask` carry, undefined when none; AmbiguousRequest when they differ. */
function oneOf(v: RequestView, mask: number): string | undefined {
  let key: string | undefined
  let from = ''
  for (const [source, name] of NAMES) {
    if ((mask & source) === 0) continue
    const c = credential(v, source, name)
    if (c === undefined) continue
    if (key === undefined) {
      key = c
      from = name
    } else if (c !== key) throw new AmbiguousRequest(`the request carries different credentials in ${from} and ${name}`)
  }
  return key
}

export function apiKey(v: RequestView): string | undefined {
  const own = providerKey(v)
  if (own !== undefined) return own
  const read = credentialsRead(v.path)
  return oneOf(v, read) ?? (read === ALL ? undefined : oneOf(v, ALL & ~read))
}
