/**
 * Descriptor keys (SPEC §3) compiled once per bundle into extractor functions.
 * A missing or empty value is `undefined` ("missing").
 */
import { IP_TYPES, normaliseAsn } from './asn-map.js'
import { headerKey, type RequestView } from './view.js'

export type Extractor = (view: RequestView) => string | undefined

export type DescriptorCompile =
  | { ok: true; extract: Extractor }
  | { ok: false; unsupported: boolean; message: string }

const NAME = /^[A-Za-z0-9_-]+$/

const nonEmpty = (v: string | undefined): string | undefined => (v === undefined || v === '' ? undefined : v)

function torFlag(v: string | undefined): string {
  const t = v?.trim().toLowerCase()
  return t === '1' || t === 'true' || t === 'yes' ? 'true' : 'false'
}

export function compileDescriptor(key: string): DescriptorCompile {
  const colon = key.indexOf(':')
  const source = colon === -1 ? key : key.slice(0, colon)
  const name = colon === -1 ? '' : key.slice(colon + 1)
  switch (source) {
    case 'jwt':
    case 'header':
    case 'query': {
      if (!NAME.test(name)) return { ok: false, unsupported: false, message: `descriptor "${key}" has an invalid name; names match ^[A-Za-z0-9_-]+$` }
      if (source === 'jwt') return { ok: true, extract: (v) => v.claim(name) }
      if (source === 'query') return { ok: true, extract: (v) => nonEmpty(v.query(name)) }
      const h = headerKey(name)
      return { ok: true, extract: (v) => nonEmpty(v.header(h)) }
    }
    case 'ip':
      switch (name) {
        case 'address': return { ok: true, extract: (v) => nonEmpty(v.ip) }
        case 'country': return { ok: true, extract: (v) => nonEmpty(v.header('x-country-code')?.trim().toUpperCase()) }
        case 'asn': return { ok: true, extract: (v) => nonEmpty(v.header('x-asn')?.trim()) }
        case 'type': return {
          ok: true,
          // X-ASN-Type from the edge, else the operator's ASN map (FAIRVISOR_ASN_MAP_FILE) by X-ASN, else unknown.
          extract: (v) => {
            const t = v.header('x-asn-type')?.trim().toLowerCase()
            if (t && IP_TYPES.has(t)) return t
            const asn = v.asnTypes === undefined ? undefined : v.header('x-asn')
            return (asn !== undefined && v.asnTypes!.get(normaliseAsn(asn))) || 'unknown'
          },
        }
        case 'tor': return { ok: true, extract: (v) => torFlag(v.header('x-tor-exit')) }
        default: return { ok: false, unsupported: false, message: `descriptor "${key}" is unknown; ip: takes address, country, asn, type or tor` }
      }
    case 'ua':
      if (name === 'bot' || name === 'bot_category') return { ok: false, unsupported: true, message: `descriptor "${key}" is not supported yet; the rule is skipped` }
      return { ok: false, unsupported: false, message: `descriptor "${key}" is unknown; ua: takes bot or bot_category` }
    default:
      return { ok: false, unsupported: false, message: `descriptor "${key}" is unknown; use jwt:, header:, query:, ip: or ua: keys` }
  }
}
