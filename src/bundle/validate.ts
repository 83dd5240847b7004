/**
 * Bundle validation, two stages: the JSON Schema (ajv, compiled once) and
 * then the checks a schema cannot express. Each issue carries the JSON
 * pointer and, where it applies, the policy and rule, so one sentence tells
 * an operator exactly what to fix. Issues under /policies/<i> drop that
 * policy alone; any other issue rejects the bundle.
 */
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import type { ErrorObject, ValidateFunction } from 'ajv'
import { compileDescriptor } from '../request/descriptors.js'
import { hostProblem } from './hosts.js'
import type { RawBundle, RawPolicy, RawRule } from './types.js'

export interface BundleIssue {
  pointer: string
  message: string
  /** Index in `policies` when the issue belongs to one policy. */
  policyIndex?: number
  policyId?: string
  ruleName?: string
  /** A warning, not an error: the bundle loads (e.g. "not supported yet", a limit that can never be reached). */
  warning?: boolean
}

export function formatIssue(file: string, i: BundleIssue): string {
  const where = i.policyId !== undefined ? `policy "${i.policyId}"${i.ruleName !== undefined ? `, rule "${i.ruleName}"` : ''}: ` : ''
  return `${file}: ${i.pointer || '/'}: ${where}${i.message}${i.message.endsWith('.') ? '' : '.'}`
}

const require = createRequire(import.meta.url)
let validator: ValidateFunction | undefined

/** The ajv validator, compiled on first use and kept for the process. */
function schemaValidator(): ValidateFunction {
  if (validator) return validator
  const Ajv2020 = require('ajv/dist/2020.js') as typeof import('ajv/dist/2020.js').default
  const ajv = new Ajv2020({ allErrors: true, strict: false, verbose: true })
  const schema = JSON.parse(readFileSync(new URL('../../schemas/bundle.schema.json', import.meta.url), 'utf8')) as object
  validator = ajv.compile(schema)
  return validator
}

const TIMESTAMP = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})Z$/

/** Epoch ms of a YYYY-MM-DDTHH:MM:SSZ string that names a real calendar instant, else undefined. */
export function parseTimestamp(s: string): number | undefined {
  const m = TIMESTAMP.exec(s)
  if (!m) return undefined
  const [y, mo, d, h, mi, se] = m.slice(1).map(Number) as [number, number, number, number, number, number]
  const t = Date.UTC(y, mo - 1, d, h, mi, se)
  const back = new Date(t)
  if (back.getUTCFullYear() !== y || back.getUTCMonth() !== mo - 1 || back.getUTCDate() !== d || h > 23 || mi > 59 || se > 59) return undefined
  return t
}

/** What a pointer names, for the subject of a sentence: `burst`, `hosts[0]`, `the policy`, `the bundle`. */
export function subjectOf(pointer: string): string {
  if (pointer === '') return 'the bundle'
  const parts = pointer.split('/').slice(1).map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'))
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
    case 'required': return `${String(p.missingProperty)} is required but missing`
    case 'type': return `${subject} must be ${typeName(String(p.type))}${got}`
    case 'exclusiveMinimum': return `${subject} must be greater than ${String(p.limit)}${got}`
    case 'minimum': return `${subject} must be at least ${String(p.limit)}${got}`
    case 'maximum': return `${subject} must be at most ${String(p.limit)}${got}`
    case 'enum': return `${subject} must be one of ${(p.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}${got}`
    case 'minLength': return p.limit === 1 ? `${subject} must not be empty` : `${subject} must be at least ${String(p.limit)} characters long`
    case 'maxLength': return `${subject} must be at most ${String(p.limit)} characters long`
    case 'minItems': return p.limit === 1 ? `${subject} must not be an empty list` : `${subject} must hold at least ${String(p.limit)} items`
    case 'anyOf': return `${subject} must set tokens_per_second (or its alias rps)`
    case 'pattern':
      if (e.schemaPath.includes('timestamp')) return `${subject} must be a UTC time written exactly like 2026-01-01T00:00:00Z${got}`
      if (e.schemaPath.includes('costSource')) return `${subject} must be fixed, header:<name> or query:<name>${got}`
      if (e.instancePath.endsWith('/scope_key')) return `scope_key must be <source>:<name> with source jwt, header, query, ip or ua${got}`
      if (p.pattern === '^/') return `${subject} must start with /${got}`
      return `${subject} must match ${String(p.pattern)}${got}`
    default: return `${subject} ${e.message ?? `fails ${e.keyword}`}`
  }
}

function schemaIssues(doc: unknown): BundleIssue[] {
  const validate = schemaValidator()
  if (validate(doc)) return []
  const errors = (validate.errors ?? []).filter((e) => e.keyword !== 'if' && !/\/anyOf\/\d+\//.test(e.schemaPath))
  const seen = new Set<string>()
  const out: BundleIssue[] = []
  for (const e of errors) {
    const pointer = e.keyword === 'required' ? `${e.instancePath}/${String((e.params as { missingProperty: string }).missingProperty)}` : e.instancePath
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
  if (!o || o.enabled !== true || typeof o.expires_at !== 'string') return
  const t = parseTimestamp(o.expires_at)
  if (t !== undefined && t <= now) out.push({ pointer: `/${key}/expires_at`, message: `${key} is enabled but its expires_at ${o.expires_at} is in the past; an enabled ${key} needs a future expires_at` })
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
    if (typeof v === 'string' && TIMESTAMP.test(v) && parseTimestamp(v) === undefined) out.push({ pointer, message: `${subjectOf(pointer)} "${v}" is not a real calendar date and time` })
  }
  if (typeof doc.expires_at === 'string') {
    const t = parseTimestamp(doc.expires_at)
    if (t !== undefined && t <= now) out.push({ pointer: '/expires_at', message: `bundle_expired: the bundle expired at ${doc.expires_at}` })
  }
  checkOverride(doc, 'global_shadow', now, out)
  checkOverride(doc, 'kill_switch_override', now, out)
}

/** Kill switch scope keys are descriptors: one that can never yield a value would silently never fire. */
function checkKillSwitches(doc: RawBundle, out: BundleIssue[]): void {
  for (const [i, k] of (doc.kill_switches ?? []).entries()) {
    const d = compileDescriptor(k.scope_key)
    if (d.ok) continue
    if (d.unsupported) out.push({ pointer: `/kill_switches/${i}/scope_key`, message: `scope_key "${k.scope_key}" is not supported yet; this kill switch never fires`, warning: true })
    else out.push({ pointer: `/kill_switches/${i}/scope_key`, message: d.message.replace(/^descriptor /, 'scope_key ') })
  }
}

function checkRule(rule: RawRule, base: string, out: BundleIssue[]): void {
  for (const [i, key] of (rule.limit_keys ?? []).entries()) {
    const d = compileDescriptor(key)
    if (!d.ok) out.push({ pointer: `${base}/limit_keys/${i}`, message: d.message, warning: d.unsupported })
  }
  for (const key of Object.keys(rule.match ?? {})) {
    const d = compileDescriptor(key)
    if (!d.ok) out.push({ pointer: `${base}/match/${key.replace(/~/g, '~0').replace(/\//g, '~1')}`, message: d.message, warning: d.unsupported })
  }
  const c = rule.algorithm_config as Record<string, unknown>
  if (rule.algorithm === 'token_bucket') {
    const rate = (c.tokens_per_second ?? c.rps) as number
    if (typeof c.burst === 'number' && c.burst < rate) out.push({ pointer: `${base}/algorithm_config/burst`, message: `burst (${c.burst}) must be at least tokens_per_second (${rate})` })
    else if ((c.cost_source ?? 'fixed') === 'fixed' && typeof c.fixed_cost === 'number' && typeof c.burst === 'number' && c.fixed_cost > c.burst) {
      out.push({ pointer: `${base}/algorithm_config/fixed_cost`, message: `fixed_cost (${c.fixed_cost}) is above burst (${c.burst}), so every request this rule selects is rejected`, warning: true })
    }
  } else if (rule.algorithm === 'cost_based') {
    // Stages are sorted by threshold at load, so file order does not matter; thresholds must differ.
    const stages = c.staged_actions as { threshold_percent: number; action: string }[]
    const seen = new Map<number, number>()
    stages.forEach((s, i) => {
      const first = seen.get(s.threshold_percent)
      if (first !== undefined) out.push({ pointer: `${base}/algorithm_config/staged_actions/${i}/threshold_percent`, message: `staged_actions thresholds must be distinct (${s.threshold_percent} is also stage ${first})` })
      else seen.set(s.threshold_percent, i)
    })
    const rejects = stages.filter((s) => s.action === 'reject')
    if (rejects.length !== 1 || rejects[0]!.threshold_percent !== 100) out.push({ pointer: `${base}/algorithm_config/staged_actions`, message: 'staged_actions must contain exactly one reject action, at threshold_percent 100' })
  } else if (rule.algorithm === 'token_bucket_llm') {
    if (typeof c.burst_tokens === 'number' && c.burst_tokens < (c.tokens_per_minute as number)) out.push({ pointer: `${base}/algorithm_config/burst_tokens`, message: `burst_tokens (${c.burst_tokens}) must be at least tokens_per_minute (${String(c.tokens_per_minute)})` })
    const tpd = c.tokens_per_day, burst = (c.burst_tokens ?? c.tokens_per_minute) as number
    if (typeof tpd === 'number' && tpd < burst) out.push({ pointer: `${base}/algorithm_config/tokens_per_day`, message: `tokens_per_day (${tpd}) is below burst_tokens (${burst}), so the day counter rejects before the minute bucket is ever empty`, warning: true })
  }
}

function checkPolicy(p: RawPolicy, index: number, out: BundleIssue[]): void {
  const base = `/policies/${index}/spec`
  for (const [i, h] of (p.spec.selector.hosts ?? []).entries()) {
    const problem = hostProblem(h)
    if (problem) out.push({ pointer: `${base}/selector/hosts/${i}`, message: problem })
  }
  p.spec.rules.forEach((r, i) => checkRule(r, `${base}/rules/${i}`, out))
  if (p.spec.fallback_limit) checkRule(p.spec.fallback_limit, `${base}/fallback_limit`, out)
  const cb = p.spec.circuit_breaker
  if (cb?.enabled && typeof cb.spend_rate_threshold_per_minute !== 'number') out.push({ pointer: `${base}/circuit_breaker`, message: 'an enabled circuit_breaker needs spend_rate_threshold_per_minute' })
  const loop = p.spec.loop_detection
  if (loop?.enabled && (typeof loop.window_seconds !== 'number' || typeof loop.threshold_identical_requests !== 'number')) out.push({ pointer: `${base}/loop_detection`, message: 'an enabled loop_detection needs window_seconds and threshold_identical_requests' })
}

/**
 * All issues of a parsed bundle document. `now` (epoch ms) decides expiry.
 * Policies with a schema issue skip the semantic stage (their shape is unknown).
 */
export function validateBundle(doc: unknown, now: number): BundleIssue[] {
  const issues = schemaIssues(doc)
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) return issues.length ? issues : [{ pointer: '', message: 'the bundle must be a JSON object' }]
  const bundle = doc as RawBundle
  const attributed = issues.map((i) => attribute(bundle, i))
  if (attributed.some((i) => i.policyIndex === undefined)) return attributed
  const semantic: BundleIssue[] = []
  checkTimestamps(bundle, now, semantic)
  checkKillSwitches(bundle, semantic)
  const broken = new Set(attributed.map((i) => i.policyIndex))
  bundle.policies.forEach((p, i) => {
    if (!broken.has(i)) checkPolicy(p, i, semantic)
  })
  const all = [...attributed, ...semantic.map((i) => attribute(bundle, i))]
  // A dropped policy's "not supported yet" warnings would only be noise next to its error.
  const dropped = new Set(all.filter((i) => !i.warning && i.policyIndex !== undefined).map((i) => i.policyIndex))
  return all.filter((i) => !(i.warning && dropped.has(i.policyIndex)))
}
