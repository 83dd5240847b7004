/**
 * Descriptor keys (docs/behaviour.md §3) compiled once per bundle into extractor functions.
 * A missing or empty value is `undefined` ("missing"); an input the request carries in
 * conflicting forms throws AmbiguousRequest (the engine answers 400).
 */
import { apiKey } from './api-key.js'
import { IP_TYPES } from './asn-map.js'
import { headerKey } from './raw-headers.js'
import type { RequestView } from './view.js'

export type Extractor = (view: RequestView) => string | undefined

export type DescriptorCompile = { ok: true; extract: Extractor } | { ok: false; message: string }

const NAME = /^[A-Za-z0-9_-]+$/

const nonEmpty = (v: string | undefined): string | undefined => (v === undefined || v === '' ? undefined : v)

function torFlag(v: string | undefined): string {
  const t = v?.trim().toLowerCase()
  return t === '1' || t === 'true' || t === 'yes' ? 'true' : 'false'
}

/**
 * The descriptors every request has a value for: the client address (only a gRPC Check that
 * names no source address lacks it) and those that default (`ip:type` unknown, `ip:tor` and
 * `ua:bot` false). Any other can be missing, and a selector matches on path, method and host
 * only, so no policy guarantees one (`fairvisor validate` warns of a fallback_limit keyed on one).
 */
const ALWAYS_PRESENT: ReadonlySet<string> = new Set(['ip:address', 'ip:type', 'ip:tor', 'ua:bot'])

/** Whether a request can lack the value of the descriptor `key` (a rule keyed on it is then skipped). */
export function mayBeMissing(key: string): boolean {
  return !ALWAYS_PRESENT.has(key)
}

export function compileDescriptor(key: string): DescriptorCompile {
  const colon = key.indexOf(':')
  const source = colon === -1 ? key : key.slice(0, colon)
  const name = colon === -1 ? '' : key.slice(colon + 1)
  switch (source) {
    case 'jwt':
    case 'header':
    case 'query': {
      if (!NAME.test(name)) return { ok: false, message: `descriptor "${key}" has an invalid name; names match ^[A-Za-z0-9_-]+$` }
      // The key readers refuse an input repeated with different values (AmbiguousRequest): never the first alone.
      if (source === 'jwt') return { ok: true, extract: (v) => v.keyClaim(name) }
      if (source === 'query') return { ok: true, extract: (v) => nonEmpty(v.keyQuery(name)) }
      const h = headerKey(name)
      return { ok: true, extract: (v) => nonEmpty(v.keyHeader(h)) }
    }
    case 'descriptor':
      // An entry of the Rate Limit Service descriptor being decided (absent on HTTP requests).
      if (!NAME.test(name)) return { ok: false, message: `descriptor "${key}" has an invalid name; names match ^[A-Za-z0-9_-]+$` }
      return { ok: true, extract: (v) => nonEmpty(v.descriptorEntry(name)) }
    case 'ip':
      switch (name) {
        case 'address':
          return { ok: true, extract: (v) => nonEmpty(v.ip) }
        case 'country':
          return { ok: true, extract: (v) => v.country }
        case 'asn':
          return { ok: true, extract: (v) => v.asn }
        case 'type':
          return {
            ok: true,
            // X-ASN-Type from the edge, else the ASN (X-ASN or the GeoIP ASN database) in the operator's map, else unknown.
            extract: (v) => {
              const t = v.header('x-asn-type')?.trim().toLowerCase()
              if (t && IP_TYPES.has(t)) return t
              const asn = v.asn
              return (asn !== undefined && v.net.asnType(asn)) || 'unknown'
            },
          }
        // X-Tor-Exit from the edge wins; without it, the operator's exit list; without that, "false".
        case 'tor':
          return {
            ok: true,
            extract: (v) => {
              const h = v.header('x-tor-exit')
              return h !== undefined ? torFlag(h) : v.net.torExit(v.ip) ? 'true' : 'false'
            },
          }
        default:
          return { ok: false, message: `descriptor "${key}" is unknown; ip: takes address, country, asn, type or tor` }
      }
    case 'ua':
      if (name === 'bot') return { ok: true, extract: (v) => (v.botCategory === '' ? 'false' : 'true') }
      // Absent (missing) for a non-bot, so a rule keyed on it applies to bots only.
      if (name === 'bot_category') return { ok: true, extract: (v) => v.botCategory || undefined }
      return { ok: false, message: `descriptor "${key}" is unknown; ua: takes bot or bot_category` }
    case 'llm':
      // A namespace of this gateway's own (not in Fairvisor Edge): LLM client conventions.
      if (name === 'api_key') return { ok: true, extract: apiKey }
      if (name === 'model') return { ok: true, extract: (v) => v.llmModel() }
      return { ok: false, message: `descriptor "${key}" is unknown; llm: takes api_key or model` }
    default:
      return {
        ok: false,
        message: `descriptor "${key}" is unknown; use jwt:, header:, query:, ip:, ua:, llm: or descriptor: keys`,
      }
  }
}
