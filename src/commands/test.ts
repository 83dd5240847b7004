/**
 * `fairvisor test <bundle> --requests <file.jsonl|-> [--format table|json] [--start <UTC time>]`:
 * run sample requests through the real engine and an in-process store, with
 * time driven by the file, and show for each one the policies matched, the
 * limits applied (rule, counter key, cost, tokens left), the rules skipped,
 * the decision, its reason and the response headers.
 *
 * One JSON object per line:
 *   {"method":"GET","path":"/v1/x?a=1","host":"api.example.com","headers":{"x-api-key":"k"},
 *    "query":{"b":"2"},"ip":"10.0.0.1","repeat":3,"at":1.5}
 * every field optional (GET, /, localhost, no headers, 127.0.0.1, 1, the previous `at`);
 * `at` is seconds after the start and must not go backwards. Blank lines and lines
 * starting with `#` are skipped. The ASN map, GeoIP databases and Tor exit
 * list are read from the same FAIRVISOR_* variables as the gateway's, and
 * the value of every limit key is shown, so an operator sees what was looked
 * up (e.g. ip:country=DE, ua:bot_category=ai_crawler). Exit 0 when every request ran (whatever the
 * decisions), 1 on a bad bundle or a bad line (named), 2 on a bad command line
 * or a bad data-file setting.
 */
import type { Decision, EngineObserver, PlannedLimit } from '../engine/evaluate.js'
import { Engine } from '../engine/evaluate.js'
import { loadBundleFile } from '../bundle/load.js'
import { parseTimestamp } from '../bundle/validate.js'
import { rateLimitHeaders } from '../engine/headers.js'
import { NetworkData } from '../request/network-data.js'
import { RequestView, type RequestInput } from '../request/view.js'
import { SettingError } from '../errors.js'
import { networkFiles } from '../settings.js'
import { MemoryStore } from '../store/memory.js'
import type { Check, Outcomes, Store } from '../store/store.js'
import { parseArgs, readInput, UsageError } from './args.js'

const USAGE = 'usage: fairvisor test <bundle> --requests <file.jsonl|-> [--format table|json] [--start 2026-01-01T00:00:00Z]'
const FIELDS = new Set(['method', 'path', 'host', 'headers', 'query', 'ip', 'repeat', 'at'])
const MAX_REPEAT = 100000

export interface SampleRequest {
  line: number
  input: RequestInput
  repeat: number
  at: number
  /** Path with the merged query, as shown. */
  target: string
}

class LineError extends Error {}

function str(v: unknown, field: string): string {
  if (typeof v !== 'string') throw new LineError(`"${field}" must be a string`)
  return v
}

/** One JSONL line → a request description; `prevAt` is the previous line's `at`. */
export function parseSample(text: string, line: number, prevAt: number): SampleRequest {
  let o: unknown
  try {
    o = JSON.parse(text)
  } catch (err) {
    throw new LineError(`is not valid JSON (${(err as Error).message})`)
  }
  if (o === null || typeof o !== 'object' || Array.isArray(o)) throw new LineError('must be a JSON object')
  const r = o as Record<string, unknown>
  for (const k of Object.keys(r)) {
    if (!FIELDS.has(k)) throw new LineError(`unknown field "${k}" (known: ${[...FIELDS].join(', ')})`)
  }
  const method = r.method === undefined ? 'GET' : str(r.method, 'method')
  const fullPath = r.path === undefined ? '/' : str(r.path, 'path')
  if (!fullPath.startsWith('/')) throw new LineError(`"path" must start with / (got ${JSON.stringify(fullPath)})`)
  const q = fullPath.indexOf('?')
  const path = q === -1 ? fullPath : fullPath.slice(0, q)
  const params = new URLSearchParams(q === -1 ? '' : fullPath.slice(q + 1))
  if (r.query !== undefined) {
    if (r.query === null || typeof r.query !== 'object' || Array.isArray(r.query)) throw new LineError('"query" must be an object of name → value')
    for (const [k, v] of Object.entries(r.query as Record<string, unknown>)) {
      for (const x of Array.isArray(v) ? v : [v]) {
        if (!['string', 'number', 'boolean'].includes(typeof x)) throw new LineError(`query "${k}" must be a string, number, boolean or a list of them`)
        params.append(k, String(x))
      }
    }
  }
  const rawHeaders: string[] = []
  if (r.headers !== undefined) {
    if (r.headers === null || typeof r.headers !== 'object' || Array.isArray(r.headers)) throw new LineError('"headers" must be an object of name → value')
    for (const [k, v] of Object.entries(r.headers as Record<string, unknown>)) {
      for (const x of Array.isArray(v) ? v : [v]) {
        if (!['string', 'number', 'boolean'].includes(typeof x)) throw new LineError(`header "${k}" must be a string, number, boolean or a list of them`)
        rawHeaders.push(k, String(x))
      }
    }
  }
  const hostHeader = rawHeaders.findIndex((h, i) => i % 2 === 0 && h.toLowerCase() === 'host')
  const host = r.host !== undefined ? str(r.host, 'host') : hostHeader !== -1 ? rawHeaders[hostHeader + 1]! : 'localhost'
  const ip = r.ip === undefined ? '127.0.0.1' : str(r.ip, 'ip')
  const repeat = r.repeat === undefined ? 1 : r.repeat
  if (typeof repeat !== 'number' || !Number.isInteger(repeat) || repeat < 1 || repeat > MAX_REPEAT) throw new LineError(`"repeat" must be an integer from 1 to ${MAX_REPEAT}`)
  const at = r.at === undefined ? prevAt : r.at
  if (typeof at !== 'number' || !Number.isFinite(at) || at < 0) throw new LineError('"at" must be a number of seconds ≥ 0')
  if (at < prevAt) throw new LineError(`"at" (${at}) is earlier than the previous request's (${prevAt}); time must not go backwards`)
  const rawQuery = params.toString()
  return {
    line,
    input: { method, path, rawQuery, host, rawHeaders, peer: ip },
    repeat,
    at,
    target: rawQuery ? `${path}?${rawQuery}` : path,
  }
}

/** The headers the gateway would send for this decision (SPEC §7, reason exposed). */
export function responseHeaders(d: Decision): [string, string][] {
  const flat = d.limit ? rateLimitHeaders(d.limit) : []
  if (!d.allowed) {
    if (d.retryAfterS !== undefined) flat.push('Retry-After', String(d.retryAfterS))
    flat.push('X-Fairvisor-Reason', d.reason)
  }
  const out: [string, string][] = []
  for (let i = 0; i < flat.length; i += 2) out.push([flat[i]!, flat[i + 1]!])
  return out
}

/** Store decorator: the outcome of each check, in check order, for the report. */
class RecordingStore implements Store {
  readonly kind = 'memory'
  last: Outcomes = []
  constructor(private readonly inner: MemoryStore) {}
  async apply(checks: readonly Check[], now: number): Promise<Outcomes> {
    this.last = await this.inner.apply(checks, now)
    return this.last
  }
  health() {
    return this.inner.health()
  }
  close() {
    return this.inner.close()
  }
}

export interface LimitReport extends Omit<PlannedLimit, 'policyId' | 'ruleName'> {
  policy: string
  rule: string
  /** allowed / rejected / not_evaluated (an earlier limit of its group rejected). */
  outcome: 'allowed' | 'rejected' | 'not_evaluated'
  /** Committed: it passed and no limit of its group (enforce or shadow) rejected (no half-spend). */
  charged: boolean
  /** Tokens left after the check (as if committed when `charged` is false). */
  tokens_left?: number
}

export interface RequestReport {
  n: number
  line: number
  at: number
  method: string
  path: string
  host: string
  ip: string
  matched_policies: readonly string[]
  limits: LimitReport[]
  skipped: { policy: string; rule: string; missing_key: string }[]
  shadow_rejects: { policy: string; rule: string; key: string }[]
  /** Value of each limit key the evaluated rules read (descriptor → value). */
  descriptors: Record<string, string>
  decision: 'allow' | 'reject' | 'error'
  status: number
  reason: string
  policy?: string
  rule?: string
  headers: Record<string, string>
}

function table(r: RequestReport): string {
  const head = `#${r.n} line ${r.line} t+${r.at.toFixed(3)}s ${r.method} ${r.path} host=${r.host} ip=${r.ip}`
  const lines = [head, `    policies: ${r.matched_policies.length ? r.matched_policies.join(', ') : '(none)'}`]
  const ds = Object.entries(r.descriptors)
  if (ds.length) lines.push(`    descriptors: ${ds.map(([k, v]) => `${k}=${v}`).join(' ')}`)
  for (const l of r.limits) {
    const left = l.tokens_left === undefined ? '' : l.outcome === 'allowed' && !l.charged ? ', not charged (another limit rejected)' : `, ${Math.floor(l.tokens_left)} left`
    lines.push(`    limit ${l.policy}/${l.rule}${l.shadow ? ' [shadow]' : ''} key=${l.key} cost=${l.cost} → ${l.outcome}${left}`)
  }
  for (const s of r.skipped) lines.push(`    skipped ${s.policy}/${s.rule}: ${s.missing_key} is missing`)
  for (const s of r.shadow_rejects) lines.push(`    shadow ${s.policy}/${s.rule} would reject key=${s.key}`)
  lines.push(`    → ${r.decision.toUpperCase()} ${r.status} ${r.reason}${r.rule ? ` (${r.policy}/${r.rule})` : ''}`)
  const h = Object.entries(r.headers)
  if (h.length) lines.push(`    headers: ${h.map(([k, v]) => `${k}: ${v}`).join(' | ')}`)
  return lines.join('\n')
}

export async function run(args: string[]): Promise<number> {
  let bundlePath: string, requestsPath: string, format: string, start: number
  try {
    const a = parseArgs(args, ['requests', 'format', 'start'])
    if (a.positional.length !== 1) throw new UsageError('give exactly one bundle file')
    bundlePath = a.positional[0]!
    const rq = a.options.get('requests')
    if (rq === undefined) throw new UsageError('--requests <file.jsonl> is required')
    requestsPath = rq
    format = a.options.get('format') ?? 'table'
    if (format !== 'table' && format !== 'json') throw new UsageError(`--format must be table or json, not "${format}"`)
    const s = a.options.get('start')
    if (s === undefined) start = Date.now()
    else {
      const t = parseTimestamp(s)
      if (t === undefined) throw new UsageError(`--start must be a UTC time like 2026-01-01T00:00:00Z, not "${s}"`)
      start = t
    }
  } catch (err) {
    if (!(err instanceof UsageError)) throw err
    process.stderr.write(`fairvisor test: ${err.message}\n${USAGE}\n`)
    return 2
  }

  const loaded = loadBundleFile(bundlePath, start)
  if (!loaded.ok) {
    for (const e of loaded.errors) process.stderr.write(`error: ${e}\n`)
    process.stderr.write(`fairvisor test: the bundle is invalid; run fairvisor validate ${bundlePath}\n`)
    return 1
  }
  for (const d of loaded.dropped) process.stderr.write(`warning: policy dropped: ${d}\n`)
  for (const w of loaded.warnings) process.stderr.write(`warning: ${w}\n`)

  // Parse the whole file first, so a bad line fails before any output.
  let text: string
  try {
    text = (await readInput(requestsPath)).toString('utf8')
  } catch (err) {
    process.stderr.write(`fairvisor test: cannot read ${requestsPath} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})\n`)
    return 1
  }
  const samples: SampleRequest[] = []
  const lines = text.split('\n')
  let prevAt = 0
  for (let i = 0; i < lines.length; i++) {
    const raw = lines[i]!.trim()
    if (raw === '' || raw.startsWith('#')) continue
    try {
      const s = parseSample(raw, i + 1, prevAt)
      prevAt = s.at
      samples.push(s)
    } catch (err) {
      if (!(err instanceof LineError)) throw err
      process.stderr.write(`fairvisor test: ${requestsPath}:${i + 1}: ${err.message}\n`)
      return 1
    }
  }
  if (samples.length === 0) {
    process.stderr.write(`fairvisor test: ${requestsPath} holds no requests\n`)
    return 1
  }

  let net: NetworkData
  try {
    net = new NetworkData(networkFiles())
  } catch (err) {
    if (!(err instanceof SettingError)) throw err
    process.stderr.write(`fairvisor test: invalid setting ${err.message}\n`)
    return 2
  }

  let planned: PlannedLimit[] = []
  let skipped: RequestReport['skipped'] = []
  let shadowRejects: RequestReport['shadow_rejects'] = []
  const observer: EngineObserver = {
    descriptorMissing: (key, policy, rule) => skipped.push({ policy, rule, missing_key: key }),
    shadowReject: (r) => shadowRejects.push({ policy: r.policyId, rule: r.ruleName, key: r.key }),
    storeError: (err) => process.stderr.write(`fairvisor test: store error: ${err.message}\n`),
    limitPlanned: (l) => planned.push(l),
  }
  const store = new RecordingStore(new MemoryStore({ maxBytes: 64 * 1024 * 1024 }))
  const engine = new Engine({ store, failPolicy: 'open', observer })
  let n = 0
  let allowed = 0
  const out: string[] = []
  const flush = (): void => {
    if (out.length) process.stdout.write(`${out.join('\n')}\n`)
    out.length = 0
  }
  for (const s of samples) {
    for (let k = 0; k < s.repeat; k++) {
      planned = []
      skipped = []
      shadowRejects = []
      store.last = []
      const d = await engine.evaluate(loaded.bundle, new RequestView(s.input, undefined, net), start + s.at * 1000, true)
      const outcomes = planned.length ? store.last : []
      n++
      if (d.allowed) allowed++
      const report: RequestReport = {
        n,
        line: s.line,
        at: s.at,
        method: s.input.method,
        path: s.target,
        host: s.input.host,
        ip: s.input.peer,
        matched_policies: d.matchedPolicies,
        limits: planned.map(({ policyId, ruleName, ...l }, i) => {
          const o = outcomes[i]
          const groupRejected = planned.some((p, j) => p.shadow === l.shadow && outcomes[j]?.allowed === false)
          return {
            policy: policyId,
            rule: ruleName,
            ...l,
            outcome: o === undefined ? 'not_evaluated' : o.allowed ? 'allowed' : 'rejected',
            charged: o?.allowed === true && !groupRejected,
            tokens_left: o?.tokens,
          }
        }),
        descriptors: Object.fromEntries([...(d.descriptors ?? [])].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))),
        skipped,
        shadow_rejects: shadowRejects,
        decision: d.allowed ? 'allow' : d.status === 429 ? 'reject' : 'error',
        status: d.status,
        reason: d.reason,
        policy: d.policyId,
        rule: d.ruleName,
        headers: Object.fromEntries(responseHeaders(d)),
      }
      out.push(format === 'json' ? JSON.stringify(report) : table(report))
      if (out.length >= 256) flush()
    }
  }
  if (format === 'table') out.push(`${n} request${n === 1 ? '' : 's'}: ${allowed} allowed, ${n - allowed} rejected`)
  flush()
  await store.close()
  return 0
}
