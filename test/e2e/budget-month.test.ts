/**
 * cost_based `"period": "1M"` through the real gateway process: a calendar
 * month of UTC. RateLimit-Reset is the seconds until the next 1st 00:00 UTC,
 * and a reject's Retry-After is never before it (at most a minute after).
 * On the in-process store with two workers and on Redis (the Lua twin's
 * calendar, on the server's clock). A month cannot pass in a test: the reset
 * itself is shown by `fairvisor test`, whose clock is driven, on
 * policies/monthly-budget.json across 2026-02-01T00:00:00Z.
 */
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { request } from 'undici'
import { CLI, ROOT, startBackend, startGateway, type Backend } from '../helpers/processes.js'
import { deleteKeys } from '../helpers/redis-servers.js'

const REDIS_URL = process.env.FAIRVISOR_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379'
const RUN = `${process.pid.toString(36)}${Date.now().toString(36)}`
const RULE = `month_${RUN}`

const dir = mkdtempSync(join(tmpdir(), 'fv-month-'))
const bundle = join(dir, 'bundle.json')
writeFileSync(
  bundle,
  JSON.stringify({
    bundle_version: 1,
    policies: [
      {
        id: 'month',
        spec: {
          selector: { pathPrefix: '/' },
          rules: [
            {
              name: RULE,
              limit_keys: ['header:x-tenant'],
              algorithm: 'cost_based',
              algorithm_config: { budget: 2, period: '1M', staged_actions: [{ threshold_percent: 100, action: 'reject' }] },
            },
          ],
        },
      },
    ],
  }),
)

let backend: Backend
before(async () => (backend = await startBackend()))
after(async () => {
  await backend.close()
  rmSync(dir, { recursive: true, force: true })
  await deleteKeys(REDIS_URL, `cb:${RULE}:*`)
})

/** Whole seconds from `ms` (epoch) to the next 1st of a month, 00:00 UTC. */
function toNextFirst(ms: number): number {
  const d = new Date(ms)
  return Math.ceil((Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1) - ms) / 1000)
}

describe('cost_based 1M through the gateway', () => {
  for (const [name, env] of [
    ['in-process store, two workers', { FAIRVISOR_WORKERS: '2' }],
    ['Redis', { FAIRVISOR_STORE: REDIS_URL, FAIRVISOR_STORE_TIMEOUT_MS: '2000' }],
  ] as const) {
    test(`${name}: RateLimit-Reset is the seconds until the next 1st 00:00 UTC; Retry-After is never earlier`, async () => {
      const gw = await startGateway({ FAIRVISOR_BACKEND_URL: backend.url, FAIRVISOR_CONFIG_FILE: bundle, ...env })
      try {
        const tenant = `${name}-${RUN}`
        const answers: { status: number; headers: Record<string, string>; before: number; after: number }[] = []
        for (let i = 0; i < 3; i++) {
          const before = Date.now()
          const r = await request(`${gw.url}/x`, { headers: { 'x-tenant': tenant } })
          await r.body.dump()
          answers.push({ status: r.statusCode, headers: r.headers as Record<string, string>, before, after: Date.now() })
        }
        assert.deepEqual(
          answers.map((a) => a.status),
          [200, 200, 429],
        )
        for (const a of answers) {
          const reset = Number(a.headers['ratelimit-reset'])
          // The gateway (or Redis) read its clock between our two readings.
          assert.ok(
            reset >= toNextFirst(a.after) && reset <= toNextFirst(a.before),
            `RateLimit-Reset ${reset}, ${toNextFirst(a.after)} s to the 1st`,
          )
          assert.match(a.headers['ratelimit-policy'] ?? '', /;q=2;w=2592000$/)
        }
        const reject = answers[2]!
        assert.equal(reject.headers['x-fairvisor-reason'], 'budget_exceeded')
        const reset = Number(reject.headers['ratelimit-reset'])
        const retry = Number(reject.headers['retry-after'])
        assert.ok(retry >= reset && retry <= reset + 60, `Retry-After ${retry}, RateLimit-Reset ${reset}`)
      } finally {
        assert.equal(await gw.stop(), 0)
      }
    })
  }
})

test('fairvisor test on policies/monthly-budget.json: the budget is spent on 31 January and whole again on 1 February 00:00 UTC', () => {
  const samples = join(dir, 'month.jsonl')
  const line = (cost: number, at: number): string => JSON.stringify({ headers: { 'x-tenant-id': 't', 'x-request-cost': String(cost) }, at })
  writeFileSync(samples, `${[line(100_000, 0), line(1, 10), line(1, 40)].join('\n')}\n`)
  const r = spawnSync(
    process.execPath,
    [CLI, 'test', 'policies/monthly-budget.json', '--requests', samples, '--start', '2026-01-31T23:59:30Z', '--format', 'json'],
    { cwd: ROOT, encoding: 'utf8', timeout: 20_000 },
  )
  assert.equal(r.status, 0, r.stderr)
  const [spent, rejected, february] = r.stdout
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { decision: string; reason: string; headers: Record<string, string> })
  assert.deepEqual([spent!.decision, spent!.headers['RateLimit-Remaining'], spent!.headers['RateLimit-Reset']], ['allow', '0', '30'])
  assert.deepEqual([rejected!.decision, rejected!.reason, rejected!.headers['RateLimit-Reset']], ['reject', 'budget_exceeded', '20'])
  const retry = Number(rejected!.headers['Retry-After'])
  assert.ok(retry >= 20 && retry <= 30, `Retry-After ${retry}: the 20 s to 1 February, plus at most half of them`)
  // 00:00:10 on 1 February: a new month, 28 days long.
  assert.deepEqual(
    [february!.decision, february!.headers['RateLimit-Remaining'], february!.headers['RateLimit-Reset']],
    ['allow', '99999', String(28 * 86_400 - 10)],
  )
})
