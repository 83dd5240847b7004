/**
 * A real gateway on a bundle that exercises most features (token bucket,
 * cost budget, circuit breaker, loop detection, LLM tokens, shadow mode, kill
 * switch), some traffic through it, and its /metrics: what the dashboard,
 * alert and docs/metrics.md tests check their metric names against.
 */
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startBackend, startGateway } from './processes.js'

const tb = (name: string, key: string, burst: number) => ({
  name,
  limit_keys: [key],
  algorithm: 'token_bucket',
  algorithm_config: { tokens_per_second: 0.01, burst },
})

const BUNDLE = {
  bundle_version: 7,
  policies: [
    { id: 'api', spec: { selector: { pathPrefix: '/api/' }, rules: [tb('per_user', 'header:x-user', 2)] } },
    { id: 'dry', spec: { selector: { pathPrefix: '/dry/' }, mode: 'shadow', rules: [tb('dry_user', 'header:x-user', 1)] } },
    {
      id: 'spend',
      spec: {
        selector: { pathPrefix: '/spend/' },
        rules: [
          {
            name: 'daily',
            limit_keys: ['header:x-user'],
            algorithm: 'cost_based',
            algorithm_config: {
              budget: 3,
              period: '1d',
              default_cost: 1,
              staged_actions: [
                { threshold_percent: 50, action: 'warn' },
                { threshold_percent: 100, action: 'reject' },
              ],
            },
          },
        ],
      },
    },
    {
      id: 'breaker',
      spec: {
        selector: { pathPrefix: '/gen/' },
        circuit_breaker: { enabled: true, spend_rate_threshold_per_minute: 2, action: 'reject', auto_reset_after_minutes: 5 },
        rules: [tb('gen', 'header:x-user', 100)],
      },
    },
    {
      id: 'loops',
      spec: {
        selector: { pathPrefix: '/loop/' },
        loop_detection: { enabled: true, window_seconds: 60, threshold_identical_requests: 2, action: 'reject', similarity: 'exact' },
        rules: [tb('loop_user', 'header:x-user', 100)],
      },
    },
    {
      id: 'llm',
      spec: {
        selector: { pathPrefix: '/v1/', methods: ['POST'] },
        rules: [
          {
            name: 'tokens',
            limit_keys: ['header:x-user'],
            algorithm: 'token_bucket_llm',
            algorithm_config: { tokens_per_minute: 100000, default_max_completion: 100 },
          },
        ],
      },
    },
  ],
  kill_switches: [{ scope_key: 'header:x-kill', scope_value: 'on' }],
}

export interface Scrape {
  /** Metric family name → type, from the `# TYPE` lines. */
  families: Map<string, string>
  text: string
}

export async function scrapeBusyGateway(): Promise<Scrape> {
  const dir = mkdtempSync(join(tmpdir(), 'fv-scrape-'))
  const file = join(dir, 'bundle.json')
  writeFileSync(file, JSON.stringify(BUNDLE))
  const backend = await startBackend((_q, s) => {
    s.setHeader('content-type', 'application/json')
    s.end(JSON.stringify({ usage: { prompt_tokens: 5, completion_tokens: 7, total_tokens: 12 } }))
  })
  // The gRPC listener is on so that its metric families are exported too.
  const gw = await startGateway({ FAIRVISOR_BACKEND_URL: backend.url, FAIRVISOR_CONFIG_FILE: file, FAIRVISOR_GRPC_PORT: '0' })
  try {
    const applied = await gw.waitForLog((l) => l.msg === 'bundle applied')
    assert.equal(applied.policies, BUNDLE.policies.length, 'every policy of the scrape bundle loaded')
    const send = async (path: string, init: RequestInit = {}): Promise<void> => {
      const r = await fetch(`${gw.url}${path}`, { ...init, headers: { 'x-user': 'u1', ...(init.headers as Record<string, string>) } })
      await r.arrayBuffer()
    }
    for (let i = 0; i < 4; i++) {
      await send('/api/x')
      await send('/dry/x')
      await send('/spend/x')
      await send('/gen/x')
      await send('/loop/x')
      await send('/v1/chat/completions', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] }),
      })
    }
    await send('/api/x', { headers: { 'x-kill': 'on' } })
    const r = await fetch(`${gw.url}/metrics`)
    assert.equal(r.status, 200)
    const text = await r.text()
    const families = new Map<string, string>()
    for (const m of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) families.set(m[1]!, m[2]!)
    return { families, text }
  } finally {
    await gw.stop()
    await backend.close()
    rmSync(dir, { recursive: true, force: true })
  }
}

/** The metric families a PromQL expression names (`_bucket`/`_sum`/`_count` of a histogram map to it). */
export function metricsIn(expr: string, families: Map<string, string>): string[] {
  const out = new Set<string>()
  for (const [name] of expr.matchAll(/\bfairvisor_[a-z0-9_]+/g)) {
    const base = name.replace(/_(bucket|sum|count)$/, '')
    out.add(!families.has(name) && families.get(base) === 'histogram' ? base : name)
  }
  return [...out]
}

/** Label names an expression groups by or matches on. */
export function labelsIn(expr: string): string[] {
  const out = new Set<string>()
  for (const m of expr.matchAll(/\b(?:by|without)\s*\(([^)]*)\)/g)) for (const l of m[1]!.split(',')) if (l.trim()) out.add(l.trim())
  for (const m of expr.matchAll(/\{([^}]*)\}/g))
    for (const mm of m[1]!.matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)/g)) out.add(mm[1]!)
  return [...out]
}
