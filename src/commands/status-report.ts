/**
 * What `fairvisor status` prints (status.ts fetches it): the gateway's readiness, the bundle in force,
 * the decision and reject rates between two reads of the admin API's stats, and the keys rejected
 * most. Pure: answers of the admin API in, lines out (docs/admin.md describes each answer).
 */

export interface BundleAnswer {
  version: string | null
  hash: string | null
  source: string | null
  loaded_at: string | null
  mode: string
  workers: number
  store: { kind: string; healthy: boolean }
  policies: { id: string; mode: string; rules: { name: string; algorithm: string; limit_keys: string[] }[] }[]
}

export interface StatsAnswer {
  at: string
  decisions: { allow: number; reject: number; shadow_reject: number }
  rejects_by_reason: Record<string, number>
}

export interface TopAnswer {
  window_seconds: number
  entries: { policy: string; rule: string; reason: string; key: string; count: number; error: number }[]
}

/** /readyz's answer: 200 ready, 503 not (with its reason). */
export interface Readiness {
  ready: boolean
  body: Record<string, unknown>
}

const rate = (n: number): string => (Math.round(n * 10) / 10).toFixed(1)

export function readinessLine(url: string, r: Readiness): string {
  if (r.ready) return `${url}: ready (bundle version ${String(r.body.policy_version)}, store ${String(r.body.store)})`
  return `${url}: NOT READY (${String(r.body.reason ?? 'unknown')}, store ${String(r.body.store ?? 'unknown')})`
}

export function bundleLines(b: BundleAnswer): string[] {
  const lines = [
    b.version === null
      ? 'bundle   none loaded'
      : `bundle   version ${b.version}, hash ${(b.hash ?? '').slice(0, 12)}, loaded ${b.loaded_at}, from ${b.source}`,
    `         ${b.mode}, ${b.workers} worker${b.workers === 1 ? '' : 's'}, store ${b.store.kind} (${b.store.healthy ? 'healthy' : 'NOT healthy'})`,
  ]
  for (const p of b.policies) {
    const rules = p.rules.map((r) => `${r.name} ${r.algorithm}${r.limit_keys.length ? ` by ${r.limit_keys.join('+')}` : ''}`)
    lines.push(`policy   ${p.id} (${p.mode}): ${rules.join('; ') || 'no rules'}`)
  }
  return lines
}

/** Rates between two stats answers, per second of the time between them (their `at`). */
export function rateLines(first: StatsAnswer, second: StatsAnswer): string[] {
  const seconds = Math.max(0.001, (Date.parse(second.at) - Date.parse(first.at)) / 1000)
  const per = (a: number, b: number): string => rate(Math.max(0, b - a) / seconds)
  const d1 = first.decisions
  const d2 = second.decisions
  const total = per(d1.allow + d1.reject, d2.allow + d2.reject)
  const lines = [
    `rates    ${total} decisions/s over ${seconds.toFixed(1)} s: ${per(d1.allow, d2.allow)} allowed, ${per(d1.reject, d2.reject)} rejected, ${per(d1.shadow_reject, d2.shadow_reject)} shadow would-reject`,
  ]
  const reasons = Object.keys(second.rejects_by_reason)
    .map((r) => [r, (second.rejects_by_reason[r]! - (first.rejects_by_reason[r] ?? 0)) / seconds] as const)
    .filter(([, n]) => n > 0)
    .sort((a, b) => b[1] - a[1])
  lines.push(`         rejects/s by reason: ${reasons.length === 0 ? 'none' : reasons.map(([r, n]) => `${r} ${rate(n)}`).join(', ')}`)
  return lines
}

export function topLines(t: TopAnswer): string[] {
  const head = `top keys rejected in the last ${t.window_seconds / 2}-${t.window_seconds} s`
  if (t.entries.length === 0) return [`${head}: none`]
  const rows = [['COUNT', 'POLICY', 'RULE', 'REASON', 'KEY'], ...t.entries.map((e) => [String(e.count), e.policy, e.rule, e.reason, e.key])]
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)))
  return [`${head}:`, ...rows.map((r) => `  ${r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join('  ')}`)]
}
