/**
 * Limit-key values that are credentials (a bearer token, an API key) never
 * reach a log line or a debug header: they are shown as `sha256:` and the
 * first 12 hex characters of their SHA-256, enough to tell keys apart and to
 * match a known key (`printf %s "$KEY" | sha256sum`), not to recover one.
 * The client address an LLM rule keys a key-less request on (llm/keyless.ts) is shown as it is.
 */
import { createHash } from 'node:crypto'
import type { CompiledRule } from '../bundle/compile.js'
import { isKeyless } from '../llm/keyless.js'

/** Descriptors whose value is a credential. */
export function isSecretDescriptor(name: string): boolean {
  const n = name.toLowerCase().replace(/_/g, '-')
  return (
    n === 'llm:api-key' ||
    n === 'header:authorization' ||
    n === 'header:proxy-authorization' ||
    n === 'header:x-api-key' ||
    n === 'header:api-key' ||
    n === 'header:x-goog-api-key' ||
    n === 'query:key' ||
    n === 'header:cookie'
  )
}

export function shortHash(value: string): string {
  return `sha256:${createHash('sha256').update(value).digest('hex').slice(0, 12)}`
}

/** Query parameters that carry credentials: Gemini's `key`, a presigned AWS request's credential, signature and token. */
const SECRET_PARAMS = /([?&](?:key|x-amz-credential|x-amz-signature|x-amz-security-token)=)([^&#]*)/gi

/** A request target as a log line may show it: credentials in its query string replaced by their short hash (of the decoded value, as the limit key holds it). */
export function urlForLog(url: string | undefined): string | undefined {
  if (url === undefined || !url.includes('=')) return url
  return url.replace(
    SECRET_PARAMS,
    (_, name: string, value: string) => name + shortHash(new URLSearchParams(`v=${value}`).get('v') ?? value),
  )
}

/** Per rule: which of its limit keys are secret (null: none, the usual case, one lookup per log). */
const secretParts = new WeakMap<CompiledRule, boolean[] | null>()

function secretsOf(rule: CompiledRule): boolean[] | null {
  let s = secretParts.get(rule)
  if (s === undefined) {
    const flags = rule.keyNames.map(isSecretDescriptor)
    s = flags.some(Boolean) ? flags : null
    secretParts.set(rule, s)
  }
  return s
}

/**
 * `key` (a counter key holding `composite`, the rule's limit-key values
 * joined with `|`) with each secret value replaced by its short hash. When a
 * value itself holds `|` the parts cannot be told apart: the whole composite
 * is hashed.
 */
export function logKey(rule: CompiledRule, key: string, composite: string): string {
  const flags = secretsOf(rule)
  if (flags === null) return key
  const parts = composite.split('|')
  const shown =
    parts.length === flags.length ? parts.map((p, i) => (flags[i] && !isKeyless(p) ? shortHash(p) : p)).join('|') : shortHash(composite)
  const at = key.indexOf(composite)
  return at === -1 ? shortHash(key) : key.slice(0, at) + shown + key.slice(at + composite.length)
}

/** A rule's limit-key values (`composite`) as logs show them: each secret value as its short hash. */
export function shownKey(rule: CompiledRule, composite: string): string {
  return logKey(rule, composite, composite)
}

/** Whether `key` is, or holds as one of its `|` parts, a short hash as shownKey() writes it. */
export function holdsShortHash(key: string): boolean {
  return key.split('|').some((part) => /^sha256:[0-9a-f]{12}$/.test(part))
}
