/**
 * Descriptor keys (SPEC §3) compiled once per bundle into extractor functions.
 * A missing or empty value is `undefined` ("missing").
 */
import { headerKey, type RequestView } from './view.js'

export type Extractor = (view: RequestView) => string | undefined

export type DescriptorCompile =
  | { ok: true; extract: Extractor }
  | { ok: false; unsupported: boolean; message: string }

const NAME = /^[A-Za-z0-9_-]+$/
const IP_TYPES = new Set(['business', 'education_research', 'government_admin', 'hosting', 'isp', 'unrouted', 'unknown'])

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
          extract: (v) => {
            const t = v.header('x-asn-type')?.trim().toLowerCase()
            return t && IP_TYPES.has(t) ? t : 'unknown'
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
