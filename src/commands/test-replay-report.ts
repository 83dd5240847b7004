/**
 * What `fairvisor test --access-log` (test-replay.ts) prints: the requests a
 * log held and what the bundle would have done with them, per
 * policy/rule/reason (enforce rejects, then shadow would-rejects) with the
 * keys rejected most (as the gateway logs them: credentials as their hash,
 * engine/log-key.ts) and the first and last request rejected; the rules
 * skipped for a missing limit key; the lines that could not be read. Memory
 * is bounded whatever the log's length: a group per policy/rule/reason, a
 * Space-Saving sketch of its keys, a few example lines.
 */
import type { OfflineResult } from './test-engine.js'
import type { SampleRequest } from './test-samples.js'
import { type TopKey, TopKeys } from './test-top-keys.js'

/** Malformed lines shown (all are counted). */
const SHOWN_MALFORMED = 5

export interface RejectedRequest {
  line: number
  time: string
  method: string
  path: string
  ip: string
  key: string | null
}

export interface RejectGroup {
  mode: 'enforce' | 'shadow'
  policy: string | null
  rule: string | null
  reason: string
  /** The status the client would have got (429, 400, 503); null for a shadow would-reject, which refuses nothing. */
  status: number | null
  count: number
  /** Distinct keys, exact unless `keys_saturated` (then at least this many). */
  keys: number
  keys_saturated: boolean
  top_keys: TopKey[]
  first: RejectedRequest
  last: RejectedRequest
}

export interface ReplaySummary {
  file: string
  format: string
  from: string | null
  to: string | null
  lines: number
  requests: number
  allowed: number
  rejected: number
  shadow_would_reject: number
  /** Allowed requests the gateway would have held (a token bucket's debt, a throttle) and the longest hold. */
  held: number
  max_hold_ms: number
  malformed: { count: number; first: { line: number; error: string }[] }
  /** Lines logged earlier than the line before them, replayed at that line's time (the clock never goes back). */
  late: { count: number; max_seconds: number }
  rejects: RejectGroup[]
  skipped: { policy: string; rule: string; missing_key: string; requests: number }[]
}

/** A rejected request as seen, shown only if it stays the first or last of its group. */
interface Seen {
  s: SampleRequest
  timeMs: number
  key: string | undefined
}

interface Group extends Omit<RejectGroup, 'keys' | 'keys_saturated' | 'top_keys' | 'first' | 'last'> {
  sketch: TopKeys
  first: Seen
  last: Seen
}

const iso = (ms: number): string => new Date(ms).toISOString()

function shown({ s, timeMs, key }: Seen): RejectedRequest {
  return { line: s.line, time: iso(timeMs), method: s.input.method, path: s.target, ip: s.input.peer, key: key ?? null }
}

export class ReplayReport {
  private lines = 0
  private requests = 0
  private allowed = 0
  private shadowRejects = 0
  private held = 0
  private maxHoldMs = 0
  private from: number | undefined
  private to: number | undefined
  private readonly malformed = { count: 0, first: [] as { line: number; error: string }[] }
  private readonly late = { count: 0, max_seconds: 0 }
  private readonly groups = new Map<string, Group>()
  private readonly skipped = new Map<string, ReplaySummary['skipped'][number]>()

  constructor(
    private readonly file: string,
    private readonly format: string,
    private readonly topN: number,
  ) {}

  /** A line that holds something (blank lines are not counted). */
  line(): void {
    this.lines++
  }

  malformedLine(line: number, error: string): void {
    if (this.malformed.count++ < SHOWN_MALFORMED) this.malformed.first.push({ line, error })
  }

  /** A line logged `seconds` before the one above it. */
  lateLine(seconds: number): void {
    this.late.count++
    this.late.max_seconds = Math.max(this.late.max_seconds, seconds)
  }

  request(s: SampleRequest, timeMs: number, r: OfflineResult): void {
    this.requests++
    this.from ??= timeMs
    this.to = timeMs
    const d = r.decision
    if (d.allowed) {
      this.allowed++
      if (d.delayMs) {
        this.held++
        this.maxHoldMs = Math.max(this.maxHoldMs, d.delayMs)
      }
    } else this.count('enforce', d.policyId, d.ruleName, d.reason, d.status, { s, timeMs, key: d.key })
    for (const x of r.shadowRejects) {
      this.shadowRejects++
      this.count('shadow', x.policyId, x.ruleName, x.reason, null, { s, timeMs, key: x.key })
    }
    const seen = new Set<string>()
    for (const k of r.skipped) {
      const id = `${k.policy}\0${k.rule}\0${k.missing_key}`
      if (seen.has(id)) continue
      seen.add(id)
      const row = this.skipped.get(id)
      if (row) row.requests++
      else this.skipped.set(id, { ...k, requests: 1 })
    }
  }

  private count(
    mode: RejectGroup['mode'],
    policy: string | undefined,
    rule: string | undefined,
    reason: string,
    status: number | null,
    here: Seen,
  ): void {
    const id = `${mode}\0${policy ?? ''}\0${rule ?? ''}\0${reason}`
    let g = this.groups.get(id)
    if (g === undefined) {
      const sketch = new TopKeys(Math.max(1000, this.topN * 10))
      g = { mode, policy: policy ?? null, rule: rule ?? null, reason, status, count: 0, first: here, last: here, sketch }
      this.groups.set(id, g)
    }
    g.count++
    g.last = here
    if (here.key !== undefined) g.sketch.add(here.key)
  }

  summary(): ReplaySummary {
    const rejects = [...this.groups.values()]
      .map(({ sketch, first, last, ...g }): RejectGroup => {
        return {
          ...g,
          keys: sketch.size,
          keys_saturated: sketch.saturated,
          top_keys: sketch.top(this.topN),
          first: shown(first),
          last: shown(last),
        }
      })
      .sort((a, b) => (a.mode === b.mode ? b.count - a.count : a.mode === 'enforce' ? -1 : 1))
    return {
      file: this.file,
      format: this.format,
      from: this.from === undefined ? null : iso(this.from),
      to: this.to === undefined ? null : iso(this.to),
      lines: this.lines,
      requests: this.requests,
      allowed: this.allowed,
      rejected: this.requests - this.allowed,
      shadow_would_reject: this.shadowRejects,
      held: this.held,
      max_hold_ms: this.maxHoldMs,
      malformed: this.malformed,
      late: this.late,
      rejects,
      skipped: [...this.skipped.values()].sort((a, b) => b.requests - a.requests),
    }
  }
}

const plural = (n: number, one: string, many = `${one}s`): string => `${n} ${n === 1 ? one : many}`

function requestLine(r: RejectedRequest): string {
  return `line ${r.line} ${r.time} ${r.method} ${r.path} ip=${r.ip}${r.key === null ? '' : ` key=${r.key}`}`
}

/** The summary as text. */
export function replayText(s: ReplaySummary): string {
  const span = s.from === null ? '' : ` from ${s.from} to ${s.to} (${(Date.parse(s.to!) - Date.parse(s.from)) / 1000} s of log time)`
  const out = [`replayed ${s.file} (${s.format})${span}`]
  out.push(`  ${plural(s.lines, 'line')}: ${plural(s.requests, 'request')}, ${s.malformed.count} malformed`)
  const held = s.held > 0 ? ` (${s.held} held for up to ${s.max_hold_ms} ms)` : ''
  out.push(`  ${s.allowed} allowed${held}, ${s.rejected} rejected, ${s.shadow_would_reject} shadow would-rejects`)
  if (s.late.count > 0)
    out.push(
      `  ${plural(s.late.count, 'line')} logged up to ${s.late.max_seconds} s before the line above ${s.late.count === 1 ? 'it' : 'them'}, replayed at that line's time`,
    )
  if (s.malformed.count > 0) {
    out.push(
      `malformed lines (${s.malformed.count}${s.malformed.count > s.malformed.first.length ? `, the first ${s.malformed.first.length}` : ''}):`,
    )
    for (const m of s.malformed.first) out.push(`  line ${m.line}: ${m.error}`)
  }
  for (const mode of ['enforce', 'shadow'] as const) {
    const groups = s.rejects.filter((g) => g.mode === mode)
    if (groups.length === 0) continue
    out.push(mode === 'enforce' ? 'rejected, per policy/rule/reason:' : 'shadow would-rejects, per policy/rule/reason:')
    for (const g of groups) {
      const keys = g.keys_saturated ? `more than ${g.keys} keys` : plural(g.keys, 'key')
      out.push(
        `  ${g.policy ?? '-'}/${g.rule ?? '-'} ${g.reason}${mode === 'enforce' ? ` (${g.status})` : ''}: ${plural(g.count, 'request')}, ${keys}`,
      )
      if (g.top_keys.length > 0) out.push('    top keys:')
      for (const k of g.top_keys) out.push(`      ${k.count}${k.error > 0 ? ` (at least ${k.count - k.error})` : ''} ${k.key}`)
      out.push(`    first: ${requestLine(g.first)}`)
      out.push(`    last:  ${requestLine(g.last)}`)
    }
  }
  if (s.skipped.length > 0) {
    out.push('rules skipped (limit key missing):')
    for (const k of s.skipped) out.push(`  ${k.policy}/${k.rule}: ${k.missing_key} missing on ${plural(k.requests, 'request')}`)
  }
  return `${out.join('\n')}\n`
}
