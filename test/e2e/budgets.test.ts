/**
 * Spend budgets, loop detection and the circuit breaker (docs/behaviour.md §5, §6, §7) on
 * the real gateway process in front of a real backend, once with the
 * in-process store and once with the Redis at 127.0.0.1:6379 (shared with
 * other runs: policy ids and rule names carry a per-run suffix).
 *
 * - cost_based: stages (warn, throttle, reject at 100 %), RateLimit-* and
 *   Retry-After of budget_exceeded (never before the period ends); a throttled request reaches the backend
 *   after delay_ms while requests on other keys flow undelayed, and a client
 *   that leaves during the delay is never forwarded (the delay timer is
 *   cancelled on close, and the proxy also drops a request whose client has
 *   gone: the check fails only when both are broken);
 * - loop_detection: the threshold-th identical request is rejected;
 * - circuit_breaker: opens at the threshold, closes after
 *   auto_reset_after_minutes; gauge, loop counter and transition log lines;
 *   `x-request-cost: 999999` from one tenant (cost from a header) leaves the
 *   breaker closed for the others;
 * - shadow: a shadow budget neither delays nor rejects.
 *
 * Periods are real UTC periods: a test that needs several requests in one
 * period first waits out the end of the current one when it is near.
 */
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { after, before, describe, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { Pool, request } from 'undici'
import { metricValue, startBackend, startGateway, type Backend, type GatewayProcess } from '../helpers/processes.js'

const SHARED_REDIS = 'redis://127.0.0.1:6379'
/** Per-run suffix of policy ids and rule names: the shared Redis keeps counters of earlier runs. */
const RUN = `${process.pid.toString(36)}${Date.now().toString(36)}`
/** The throttle delay under test: long, so that "not slowed" and "arrived after" have wide margins. */
const DELAY_MS = 3000

const dir = mkdtempSync(join(tmpdir(), 'fv-budgets-'))
after(() => rmSync(dir, { recursive: true, force: true }))

interface Arrival {
  path: string
  tenant: string | undefined
  /** performance.now() of this process when the backend got the request. */
  at: number
}

const arrivals: Arrival[] = []
let backend: Backend
before(async () => {
  backend = await startBackend((req, res) => {
    arrivals.push({ path: req.url ?? '', tenant: req.headers['x-tenant'] as string | undefined, at: performance.now() })
    res.end('ok')
  })
})
after(() => backend.close())

const budgetRule = (name: string, budget: number, period: string, stages: object[], extra: object = {}): object => ({
  name,
  limit_keys: ['header:x-tenant'],
  algorithm: 'cost_based',
  algorithm_config: { budget, period, staged_actions: [...stages, { threshold_percent: 100, action: 'reject' }], ...extra },
})
const bigBucket = (name: string): object => ({
  name,
  limit_keys: ['header:x-tenant'],
  algorithm: 'token_bucket',
  algorithm_config: { tokens_per_second: 1000, burst: 1000 },
})
const policy = (id: string, prefix: string, rules: object[], more: object = {}): object => ({
  id,
  spec: { selector: { pathPrefix: prefix }, rules, ...more },
})

const ids = (store: string) => {
  const s = `${store}_${RUN}`
  return {
    one: `one_${s}`,
    ten: `ten_${s}`,
    thr: `thr_${s}`,
    loop: `loop_${s}`,
    brk: `brk_${s}`,
    spend: `spend_${s}`,
    shadow: `shadow_${s}`,
  }
}

function bundleFile(store: string): string {
  const n = ids(store)
  const file = join(dir, `bundle-${store}.json`)
  writeFileSync(
    file,
    JSON.stringify({
      bundle_version: 1,
      policies: [
        policy(n.one, '/one/', [
          budgetRule(n.one, 1, '5m', [
            { threshold_percent: 80, action: 'warn' },
            { threshold_percent: 95, action: 'throttle', delay_ms: 5 },
          ]),
        ]),
        policy(n.ten, '/ten/', [budgetRule(n.ten, 10, '1d', [{ threshold_percent: 50, action: 'warn' }])]),
        policy(n.thr, '/throttle/', [
          budgetRule(n.thr, 10, '1d', [{ threshold_percent: 50, action: 'throttle', delay_ms: DELAY_MS }], { cost_key: 'header:x-cost' }),
        ]),
        policy(n.loop, '/loop/', [bigBucket(n.loop)], {
          loop_detection: { enabled: true, window_seconds: 60, threshold_identical_requests: 3, action: 'reject', similarity: 'exact' },
        }),
        policy(n.brk, '/breaker/', [bigBucket(n.brk)], {
          circuit_breaker: { enabled: true, spend_rate_threshold_per_minute: 5, action: 'reject', auto_reset_after_minutes: 0.05 },
        }),
        // The cost comes from the client: one tenant's huge cost must not open the breaker for all.
        policy(
          n.spend,
          '/spend/',
          [
            {
              name: n.spend,
              limit_keys: ['header:x-tenant'],
              algorithm: 'token_bucket',
              algorithm_config: { tokens_per_second: 100, burst: 100, cost_source: 'header:x-request-cost' },
            },
          ],
          { circuit_breaker: { enabled: true, spend_rate_threshold_per_minute: 1000, action: 'reject', auto_reset_after_minutes: 0 } },
        ),
        policy(n.shadow, '/shadow/', [budgetRule(n.shadow, 1, '1d', [{ threshold_percent: 50, action: 'throttle', delay_ms: DELAY_MS }])], {
          mode: 'shadow',
        }),
      ],
    }),
  )
  return file
}

interface Reply {
  status: number
  headers: Record<string, string>
  ms: number
}

async function get(gw: GatewayProcess, path: string, headers: Record<string, string> = {}, via?: Pool): Promise<Reply> {
  const t0 = performance.now()
  const r = via ? await via.request({ path, method: 'GET', headers }) : await request(gw.url + path, { headers })
  await r.body.dump()
  const flat: Record<string, string> = {}
  for (const [k, v] of Object.entries(r.headers)) flat[k] = Array.isArray(v) ? v.join(', ') : String(v)
  return { status: r.statusCode, headers: flat, ms: performance.now() - t0 }
}

/** If the current UTC period of `periodS` ends within `marginS`, wait until the next one has begun. */
async function awayFromBoundary(periodS: number, marginS: number): Promise<void> {
  const left = periodS - ((Date.now() / 1000) % periodS)
  if (left < marginS) await sleep((left + 0.25) * 1000)
}

// Every case has policies of its own (and each store its own gateway and ids), and the long ones wait on
// real time (a 3 s throttle, a breaker's 3 s reset): the cases run at once, on both stores at once.
describe('budgets, loops and breakers on both stores', { concurrency: true }, () => {
  for (const store of ['memory', SHARED_REDIS]) {
    const label = store === 'memory' ? 'in-process store' : `Redis (${store})`
    describe(`budgets, loops and breakers: ${label}`, { concurrency: true }, () => {
      const tag = store === 'memory' ? 'mem' : 'redis'
      const n = ids(tag)
      let gw: GatewayProcess
      before(async () => {
        // fail-closed: a Redis problem shows as 503, not as a silently allowed request.
        gw = await startGateway({
          FAIRVISOR_BACKEND_URL: backend.url,
          FAIRVISOR_CONFIG_FILE: bundleFile(tag),
          FAIRVISOR_STORE: store,
          FAIRVISOR_FAIL_POLICY: 'closed',
          FAIRVISOR_REDIS_TIMEOUT_MS: '2000',
        })
      })
      after(() => gw.stop())

      test('a 5-minute budget of 1 (warn 80 %, throttle 95 %, reject 100 %): the first request is allowed with a warning, the second rejected', async () => {
        await awayFromBoundary(300, 10)
        // This case's own tenant: the cases beside it send to the same backend meanwhile.
        const tenant = `t-${tag}-${RUN}`
        const forwarded = (): number => arrivals.filter((a) => a.tenant === tenant).length
        const first = await get(gw, '/one/a', { 'x-tenant': tenant })
        assert.equal(first.status, 200)
        // 100 % of the budget: the highest warn/throttle stage applies (throttle, 5 ms).
        assert.equal(first.headers['x-fairvisor-warning'], 'budget_throttle')
        assert.equal(first.headers['ratelimit-limit'], '1')
        assert.equal(first.headers['ratelimit-remaining'], '0')
        assert.equal(first.headers['retry-after'], undefined)
        const second = await get(gw, '/one/a', { 'x-tenant': tenant })
        assert.equal(second.status, 429)
        assert.equal(second.headers['x-fairvisor-reason'], 'budget_exceeded')
        const retry = Number(second.headers['retry-after'])
        const reset = Number(second.headers['ratelimit-reset'])
        assert.ok(reset >= 1 && reset <= 300, `RateLimit-Reset ${reset}: the rest of the 5-minute period`)
        assert.ok(
          Number.isInteger(retry) && retry >= reset && retry <= reset + 60,
          `Retry-After ${second.headers['retry-after']}: the period's end (${reset} s), jittered later by at most a minute`,
        )
        assert.equal(second.headers['ratelimit-limit'], '1')
        assert.equal(second.headers['ratelimit-remaining'], '0')
        assert.equal(forwarded(), 1, 'the reject never reached the backend')
      })

      test('a budget of 10 with a 50 % warn stage: warnings from the 5th request, the 11th rejected; RateLimit-Remaining = 10 − usage', async () => {
        await awayFromBoundary(86_400, 10)
        const seen: string[] = []
        for (let i = 1; i <= 10; i++) {
          const r = await get(gw, '/ten/x', { 'x-tenant': 't' })
          assert.equal(r.status, 200)
          assert.equal(r.headers['ratelimit-limit'], '10')
          assert.equal(r.headers['ratelimit-remaining'], String(10 - i))
          seen.push(r.headers['x-fairvisor-warning'] ?? '-')
        }
        assert.deepEqual(seen, [
          '-',
          '-',
          '-',
          '-',
          'budget_warn',
          'budget_warn',
          'budget_warn',
          'budget_warn',
          'budget_warn',
          'budget_warn',
        ])
        const eleventh = await get(gw, '/ten/x', { 'x-tenant': 't' })
        assert.equal(eleventh.status, 429)
        assert.equal(eleventh.headers['x-fairvisor-reason'], 'budget_exceeded')
        assert.equal(eleventh.headers['ratelimit-remaining'], '0')
        assert.ok(Number(eleventh.headers['retry-after']) >= 1)
        // Another tenant has its own budget.
        assert.equal((await get(gw, '/ten/x', { 'x-tenant': 'u' })).headers['ratelimit-remaining'], '9')
      })

      test(`throttle: the request reaches the backend ${DELAY_MS} ms later, 100 requests on other keys meanwhile are not slowed, a client that leaves is not forwarded`, async () => {
        await awayFromBoundary(86_400, 30)
        const slow = `slow-${tag}-${RUN}`
        const gone = `gone-${tag}-${RUN}`
        // Cost 6 of a budget of 10: 60 %, past the 50 % throttle stage.
        const sentAt = performance.now()
        const throttled = get(gw, '/throttle/slow', { 'x-tenant': slow, 'x-cost': '6' })
        // A client that sends the same kind of request and hangs up during the delay.
        const socket = connect(gw.port, '127.0.0.1')
        socket.on('error', () => {})
        socket.write(`GET /throttle/gone HTTP/1.1\r\nHost: 127.0.0.1\r\nx-tenant: ${gone}\r\nx-cost: 6\r\n\r\n`)
        let goneAnswered = false
        socket.on('data', () => (goneAnswered = true))
        await sleep(300)
        socket.destroy()

        const pool = new Pool(gw.url, { connections: 8 })
        const others: Reply[] = []
        const othersStart = performance.now()
        await Promise.all(
          Array.from({ length: 8 }, async (_, c) => {
            for (let i = c; i < 100; i += 8)
              others.push(await get(gw, `/throttle/other${i}`, { 'x-tenant': `other-${tag}-${RUN}-${i}`, 'x-cost': '1' }, pool))
          }),
        )
        const othersDone = performance.now()
        await pool.close()

        const r = await throttled
        const arrived = arrivals.find((a) => a.tenant === slow)
        assert.equal(r.status, 200)
        assert.equal(r.headers['x-fairvisor-warning'], 'budget_throttle')
        assert.equal(r.headers['ratelimit-remaining'], '4')
        assert.ok(arrived, 'the throttled request was forwarded')
        const waited = arrived.at - sentAt
        assert.ok(waited >= DELAY_MS, `reached the backend ${waited.toFixed(1)} ms after it was sent; delay_ms ${DELAY_MS}`)

        assert.equal(others.length, 100)
        assert.deepEqual([...new Set(others.map((o) => o.status))], [200])
        assert.ok(others.every((o) => o.headers['x-fairvisor-warning'] === undefined))
        const slowest = Math.max(...others.map((o) => o.ms))
        const detail = `100 requests took ${(othersDone - othersStart).toFixed(0)} ms in all, the slowest ${slowest.toFixed(0)} ms`
        assert.ok(slowest < DELAY_MS / 2, `requests on other keys are not held by the delay: ${detail}`)
        assert.ok(othersDone < arrived.at, `all 100 were answered before the throttled request was forwarded: ${detail}`)

        // The departed client's delay ended long ago (it started before the slow one's): it must not have been forwarded.
        await sleep(500)
        assert.equal(goneAnswered, false, 'the departed client got no answer before leaving')
        assert.equal(arrivals.filter((a) => a.tenant === gone).length, 0, 'a client that left during the delay is not forwarded')
      })

      test('loop detection (threshold 3): of 5 identical requests the third and later are rejected loop_detected; another query is not', async () => {
        const metricBefore = (await metricValue(gw, 'fairvisor_loop_detected_total', `policy="${n.loop}"`)) ?? 0
        const path = `/loop/step?run=${RUN}&b=2`
        const statuses: number[] = []
        for (let i = 0; i < 5; i++) {
          const r = await get(gw, path, { 'x-tenant': 'agent' })
          statuses.push(r.status)
          if (i === 2) {
            assert.equal(r.headers['x-fairvisor-reason'], 'loop_detected')
            const retry = Number(r.headers['retry-after'])
            assert.ok(
              Number.isInteger(retry) && retry >= 1 && retry <= 90,
              `Retry-After ${r.headers['retry-after']}: the rest of the 60 s window, jittered`,
            )
          }
        }
        assert.deepEqual(statuses, [200, 200, 429, 429, 429])
        assert.equal(
          (await get(gw, `/loop/step?run=${RUN}&b=3`, { 'x-tenant': 'agent' })).status,
          200,
          'a different query is another fingerprint',
        )
        assert.equal(await metricValue(gw, 'fairvisor_loop_detected_total', `policy="${n.loop}"`), metricBefore + 3)
      })

      test('circuit breaker (5 per minute, reset after 0.05 min): opens at the 5th request, rejects, closes after 3 s; gauge and one log line per change', async () => {
        await awayFromBoundary(60, 5)
        const statuses: number[] = []
        for (let i = 0; i < 4; i++) statuses.push((await get(gw, '/breaker/a', { 'x-tenant': `t${i}` })).status)
        assert.deepEqual(statuses, [200, 200, 200, 200])
        const openedAt = performance.now()
        const opening = await get(gw, '/breaker/a', { 'x-tenant': 't4' })
        assert.equal(opening.status, 429)
        assert.equal(opening.headers['x-fairvisor-reason'], 'circuit_breaker_open')
        const open = await get(gw, '/breaker/b', { 'x-tenant': 'someone-else' })
        assert.equal(open.status, 429, 'open for every request of the policy')
        assert.equal(open.headers['x-fairvisor-reason'], 'circuit_breaker_open')
        const retry = Number(open.headers['retry-after'])
        assert.ok(retry >= 1 && retry <= 5, `Retry-After ${open.headers['retry-after']}: the 3 s left, jittered`)
        assert.equal(await metricValue(gw, 'fairvisor_circuit_state', `target="${n.brk}"`), 1)
        await gw.waitForLog((l) => l.event === 'circuit_open' && l.policy === n.brk)

        await sleep(Math.max(0, openedAt + 3000 + 400 - performance.now()))
        const closed = await get(gw, '/breaker/a', { 'x-tenant': 't5' })
        assert.equal(closed.status, 200, `closed again after 3 s (${closed.headers['x-fairvisor-reason']})`)
        assert.equal(await metricValue(gw, 'fairvisor_circuit_state', `target="${n.brk}"`), 0)
        await gw.waitForLog((l) => l.event === 'circuit_closed' && l.policy === n.brk)
        assert.equal((await get(gw, '/breaker/a', { 'x-tenant': 't6' })).status, 200)
        await sleep(100)
        const lines = gw.logs
          .filter((l) => l.policy === n.brk && (l.event === 'circuit_open' || l.event === 'circuit_closed'))
          .map((l) => l.event)
        assert.deepEqual(lines, ['circuit_open', 'circuit_closed'])
      })

      test('circuit breaker on a client-chosen cost: x-request-cost 999999 from one tenant leaves every other tenant unaffected', async () => {
        const attack = await get(gw, '/spend/a', { 'x-tenant': `evil-${tag}`, 'x-request-cost': '999999' })
        assert.equal(attack.status, 429)
        assert.equal(
          attack.headers['x-fairvisor-reason'],
          'token_bucket_exceeded',
          'rejected by its own rule, which keeps it off the breaker',
        )
        // Without a tenant the rule does not apply; the breaker still counts the cost, capped at the rule's burst (100).
        assert.equal((await get(gw, '/spend/a', { 'x-request-cost': '999999' })).status, 200)
        for (let i = 0; i < 5; i++) {
          const r = await get(gw, '/spend/b', { 'x-tenant': `victim${i}-${tag}`, 'x-request-cost': '10' })
          assert.equal(r.status, 200, `tenant ${i}: ${r.headers['x-fairvisor-reason']}`)
        }
        assert.equal(await metricValue(gw, 'fairvisor_circuit_state', `target="${n.spend}"`), 0)
        assert.equal(gw.logs.filter((l) => l.event === 'circuit_open' && l.policy === n.spend).length, 0)
      })

      test('shadow: a shadow budget never delays and never rejects (no Retry-After, no reason), and logs would_reject', async () => {
        await awayFromBoundary(86_400, 10)
        const tenant = `shadow-${tag}-${RUN}`
        for (let i = 0; i < 3; i++) {
          const r = await get(gw, '/shadow/x', { 'x-tenant': tenant })
          assert.equal(r.status, 200)
          assert.equal(r.headers['retry-after'], undefined)
          assert.equal(r.headers['x-fairvisor-reason'], undefined)
          assert.ok(r.ms < DELAY_MS / 2, `not delayed: ${r.ms.toFixed(0)} ms (the shadow throttle stage says ${DELAY_MS} ms)`)
        }
        assert.equal(arrivals.filter((a) => a.tenant === tenant).length, 3)
        const line = await gw.waitForLog((l) => l.event === 'would_reject' && l.policy === n.shadow)
        assert.equal(line.reason, 'budget_exceeded')
      })
    })
  }
})
