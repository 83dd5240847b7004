/**
 * Bundle validation, two stages: the JSON Schema (schema.ts) and
 * then the checks a schema cannot express. Each issue carries the JSON
 * pointer and, where it applies, the policy and rule, so one sentence tells
 * an operator exactly what to fix. Issues under /policies/<i> drop that
 * policy alone; any other issue rejects the bundle.
 */
import type { ErrorObject } from 'ajv'
import { compileDescriptor } from '../request/descriptors.js'
import { schemaValidator } from './schema.js'
import type { BundleIssue, GatewayMode, RawBundle, RawKillSwitch, RawPolicy } from './types.js'
import { checkPolicy } from './validate-policy.js'
import { checkPrices } from './validate-prices.js'

export type { BundleIssue }

export function formatIssue(file: string, i: BundleIssue): string {
  const where = i.policyId !== undefined ? `policy "${i.policyId}"${i.ruleName !== undefined ? `, rule "${i.ruleName}"` : ''}: ` : ''
  return `${file}: ${i.pointer || '/'}: ${where}${i.message}${i.message.endsWith('.') ? '' : '.'}`
}

const TIMESTAMP = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})Z$/

/** Epoch ms of a YYYY-MM-DDTHH:MM:SSZ string that names a real calendar instant, else undefined. */
export function parseTimestamp(s: string): number | undefined {
  const m = TIMESTAMP.exec(s)
  if (!m) return undefined
  const [y, mo, d, h, mi, se] = m.slice(1).map(Number) as [number, number, number, number, number, number]
  const t = Date.UTC(y, mo - 1, d, h, mi, se)
  const back = new Date(t)
  if (back.getUTCFullYear() !== y || back.getUTCMonth() !== mo - 1 || back.getUTCDate() !== d || h > 23 || mi > 59 || se > 59)
    return undefined
  return t
}

/** What a pointer names, for the subject of a sentence: `burst`, `hosts[0]`, `the policy`, `the bundle`. */
function subjectOf(pointer: string): string {
  if (pointer === '') return 'the bundle'
  const parts = pointer
    .split('/')
    .slice(1)
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'))
  const last = parts[parts.length - 1]!
  const parent = parts[parts.length - 2]
  if (parent === 'match') return `the match value of "${last}"`
  if (/^\d+$/.test(last)) {
    if (parent === 'policies' && parts.length === 2) return 'the policy'
    if (parent === 'rules') return 'the rule'
    if (parent === 'kill_switches') return 'the kill switch'
    if (parent === 'staged_actions') return `staged action ${last}`
    return `${parent ?? ''}[${last}]`
  }
  return last
}

/** A JSON value quoted for a message, cut so one huge value cannot flood a log line. */
function shown(v: unknown): string {
  const s = JSON.stringify(v) ?? String(v)
  return s.length > 60 ? `${s.slice(0, 57)}...` : s
}

function typeName(t: string): string {
  const names = t.split(',').map((x) => `${/^[aeiou]/.test(x) ? 'an' : 'a'} ${x}`)
  return names.length > 1 ? `${names.slice(0, -1).join(', ')} or ${names[names.length - 1]!}` : names[0]!
}

/** One ajv error as a sentence whose subject is the property it is about. */
function ajvMessage(e: ErrorObject): string {
  const p = e.params as Record<string, unknown>
  const subject = subjectOf(e.instancePath)
  const got = e.data === undefined ? '' : `, not ${shown(e.data)}`
  switch (e.keyword) {
    case 'required':
      return `${String(p.missingProperty)} is required but missing`
    case 'type':
      return `${subject} must be ${typeName(String(p.type))}${got}`
    case 'exclusiveMinimum':
      return `${subject} must be greater than ${String(p.limit)}${got}`
    case 'minimum':
      return `${subject} must be at least ${String(p.limit)}${got}`
    case 'maximum':
      return `${subject} must be at most ${String(p.limit)}${got}`
    case 'enum':
      return `${subject} must be one of ${(p.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}${got}`
    case 'minLength':
      return p.limit === 1 ? `${subject} must not be empty` : `${subject} must be at least ${String(p.limit)} characters long`
    case 'maxLength':
      return `${subject} must be at most ${String(p.limit)} characters long`
    case 'minItems':
      return p.limit === 1 ? `${subject} must not be an empty list` : `${subject} must hold at least ${String(p.limit)} items`
    case 'additionalProperties': {
      const known = Object.keys((e.parentSchema?.properties ?? {}) as object)
      return `${subject} has a field it does not know: ${JSON.stringify(p.additionalProperty)}${known.length ? ` (it takes ${known.join(', ')})` : ''}`
    }
    case 'anyOf':
      return `${subject} must set tokens_per_second (or its alias rps)`
    case 'pattern':
      if (e.schemaPath.includes('timestamp')) return `${subject} must be a UTC time written exactly like 2026-01-01T00:00:00Z${got}`
      if (e.schemaPath.includes('costSource')) return `${subject} must be fixed, header:<name> or query:<name>${got}`
      if (e.instancePath.endsWith('/cost_key')) return `${subject} must be fixed, llm_price, header:<name> or query:<name>${got}`
      if (e.schemaPath.includes('statusPatterns')) return `${subject} must be a status code such as "401" or a class such as "5xx"${got}`
      if (e.instancePath === '/llm_prices/currency') return `currency must be an ISO 4217 code in capitals, such as "USD"${got}`
      if (e.instancePath.endsWith('/scope_key')) return `scope_key must be <source>:<name> with source jwt, header, query, ip or ua${got}`
      if (p.pattern === '^/') return `${subject} must start with /${got}`
      return `${subject} must match ${String(p.pattern)}${got}`
    default:
      return `${subject} ${e.message ?? `fails ${e.keyword}`}`
  }
}

function schemaIssues(doc: unknown): BundleIssue[] {
  const validate = schemaValidator()
  if (validate(doc)) return []
  const errors = (validate.errors ?? []).filter((e) => e.keyword !== 'if' && !/\/anyOf\/\d+\//.test(e.schemaPath))
  const seen = new Set<string>()
  const out: BundleIssue[] = []
  for (const e of errors) {
    const pointer =
      e.keyword === 'required' ? `${e.instancePath}/${String((e.params as { missingProperty: string }).missingProperty)}` : e.instancePath
    const message = ajvMessage(e)
    const k = `${pointer}\0${message}`
    if (seen.has(k)) continue
    seen.add(k)
    out.push({ pointer, message })
  }
  return out
}

/** Attach policy index, id and rule name to issues whose pointer lies inside a policy. */
function attribute(doc: RawBundle, issue: BundleIssue): BundleIssue {
  const m = /^\/policies\/(\d+)(?:\/spec\/(rules\/(\d+)|fallback_limit))?/.exec(issue.pointer)
  if (!m) return issue
  const index = Number(m[1])
  const policy = Array.isArray(doc.policies) ? (doc.policies[index] as RawPolicy | undefined) : undefined
  const policyId = typeof policy?.id === 'string' && policy.id !== '' ? policy.id : `#${index}`
  let ruleName: string | undefined
  if (m[2] === 'fallback_limit') ruleName = 'fallback_limit'
  else if (m[3] !== undefined) {
    const rule = policy?.spec?.rules?.[Number(m[3])]
    ruleName = typeof rule?.name === 'string' && rule.name !== '' ? rule.name : `#${m[3]}`
  }
  return { ...issue, policyIndex: index, policyId, ruleName }
}

function checkOverride(doc: RawBundle, key: 'global_shadow' | 'kill_switch_override', now: number, out: BundleIssue[]): void {
  const o = doc[key]
  if (o?.enabled !== true || typeof o.expires_at !== 'string') return
  const t = parseTimestamp(o.expires_at)
  if (t !== undefined && t <= now)
    out.push({
      pointer: `/${key}/expires_at`,
      message: `${key} is enabled but its expires_at ${o.expires_at} is in the past; an enabled ${key} needs a future expires_at`,
    })
}

function checkTimestamps(doc: RawBundle, now: number, out: BundleIssue[]): void {
  const stamps: [string, unknown][] = [
    ['/issued_at', doc.issued_at],
    ['/expires_at', doc.expires_at],
    ['/global_shadow/expires_at', doc.global_shadow?.expires_at],
    ['/kill_switch_override/expires_at', doc.kill_switch_override?.expires_at],
    ...(doc.kill_switches ?? []).map((k, i): [string, unknown] => [`/kill_switches/${i}/expires_at`, k?.expires_at]),
  ]
  for (const [pointer, v] of stamps) {
    if (typeof v === 'string' && TIMESTAMP.test(v) && parseTimestamp(v) === undefined)
      out.push({ pointer, message: `${subjectOf(pointer)} "${v}" is not a real calendar date and time` })
  }
  if (typeof doc.expires_at === 'string') {
    const t = parseTimestamp(doc.expires_at)
    if (t !== undefined && t <= now)
      out.push({ pointer: '/expires_at', message: `bundle_expired: the bundle expired at ${doc.expires_at}` })
  }
  checkOverride(doc, 'global_shadow', now, out)
  checkOverride(doc, 'kill_switch_override', now, out)
}

/** Kill switch scope keys are descriptors: one that can never yield a value would silently never fire. */
function checkKillSwitches(killSwitches: readonly RawKillSwitch[], clean: (pointer: string) => boolean, out: BundleIssue[]): void {
  for (const [i, k] of killSwitches.entries()) {
    if (!clean(`/kill_switches/${i}`) || !isObject(k) || typeof k.scope_key !== 'string') continue
    const d = compileDescriptor(k.scope_key)
    if (!d.ok) out.push({ pointer: `/kill_switches/${i}/scope_key`, message: d.message.replace(/^descriptor /, 'scope_key ') })
  }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v)
}

/**
 * All issues of a parsed bundle document. `now` (epoch ms) decides expiry;
 * `mode` (FAIRVISOR_MODE, default reverse_proxy) and `grpc` (a gRPC listener
 * deciding on it too) what rules can do: options that act on the response,
 * or on the end of each request (a concurrency rule's slot), need the
 * gateway to see it. Every error is reported in one pass: the semantic
 * checks run on each part the schema accepted, even when another part (or
 * the top level) failed.
 */
export function validateBundle(doc: unknown, now: number, mode: GatewayMode = 'reverse_proxy', grpc = false): BundleIssue[] {
  const issues = schemaIssues(doc)
  if (!isObject(doc)) return issues.length ? issues : [{ pointer: '', message: 'the bundle must be a JSON object' }]
  const bundle = doc as unknown as RawBundle
  const attributed = issues.map((i) => attribute(bundle, i))
  const clean = (pointer: string): boolean =>
    !issues.some((i) => i.pointer === pointer || i.pointer.startsWith(`${pointer}/`) || pointer.startsWith(`${i.pointer}/`))
  const semantic: BundleIssue[] = []
  const killSwitches = Array.isArray(bundle.kill_switches) ? bundle.kill_switches : []
  checkTimestamps({ ...bundle, kill_switches: killSwitches.map((k) => (isObject(k) ? k : ({} as RawKillSwitch))) }, now, semantic)
  checkKillSwitches(killSwitches, clean, semantic)
  checkPrices(bundle, clean, semantic)
  if (Array.isArray(bundle.policies)) {
    bundle.policies.forEach((p, i) => {
      const broken = issues.some((x) => x.pointer === `/policies/${i}` || x.pointer === `/policies/${i}/spec`)
      if (!broken && isObject(p) && isObject(p.spec)) checkPolicy(p, i, clean, semantic, mode, grpc)
    })
  }
  const all = [...attributed, ...semantic.map((i) => attribute(bundle, i))]
  // A dropped policy's warnings would only be noise next to its error.
  const dropped = new Set(all.filter((i) => !i.warning && i.policyIndex !== undefined).map((i) => i.policyIndex))
  return all.filter((i) => !(i.warning && dropped.has(i.policyIndex)))
}
