/**
 * sliding_window through the real gateway process (docs/algorithms.md,
 * "Sliding windows"): a limit of 10 per 5 s against a steady stream of one
 * request every 150 ms (90 of them: 2.7 windows). The backend records when
 * each allowed request arrives: no 5 s span holds more than 11, while a
 * fixed window of the same limit, run on the same request times from its
 * worst start (a window of the clock turning just after the tenth request),
 * lets about 20 through. Once on the in-process store with two workers, once
 * on Redis with two gateway processes sharing the counter (the stream
 * alternates between them), both at once: the stream takes 13.5 s of real
 * time, as the gateway reads the wall clock (and Redis its own). Beside the
 * stream, on a rule of 10 per 10 s of its own (its own path), a client that
 * spends its limit at the end of a window is refused at the start of the
 * next until enough of that count has left the window (what the previous
 * window's weight is for: a window counted from the first request alone
 * would let the steady stream through as well). Rejects are 429
 * sliding_window_exceeded with Retry-After never before RateLimit-Reset, and
 * are counted in fairvisor_decisions_total. `fairvisor test` simulates the
 * policies/sliding-window.json example on a driven clock.
 *
 * Every figure of the stream scales with the window (the same shape at half
 * the 10 s window it once had); a shorter window makes each ms of lateness
 * count for more, and 5 s keeps the stream's checks clear of the lateness a
 * busy two-core machine gives (a simulation of the kind with sends stalled up
 * to 400 ms and arrivals 200 ms apart from their decisions never found a
 * 12th in a window, nor the count 2 from the maths). The burst keeps its 10 s
 * window: its checks hinge on when single requests reach the store.
 */
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { request } from 'undici'
import { SLIDING_WINDOW_KIND, slidingLimit } from '../../src/algorithms/kinds/sliding-window/kind.js'
import { counterLimit, WINDOW_COUNTER_KIND } from '../../src/algorithms/kinds/window-counter/kind.js'
import { CLI, metricValue, ROOT, startBackend, startGateway, type Backend, type GatewayProcess } from '../helpers/processes.js'
import { deleteKeys } from '../helpers/redis-servers.js'

const REDIS_URL = process.env.FAIRVISOR_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379'
const RUN = `${process.pid.toString(36)}${Date.now().toString(36)}`
const RULE = `sw_${RUN}`
const BURST_RULE = `sw_${RUN}_burst`
const LIMIT = 10
const WINDOW_S = 5
const INTERVAL_MS = 150
const REQUESTS = 90
/** The end-of-window client's rule: 10 per 10 s. */
const BURST_WINDOW_S = 10

const dir = mkdtempSync(join(tmpdir(), 'fv-sliding-'))
const bundle = join(dir, 'bundle.json')
/** A policy on `path` with one sliding_window rule of LIMIT per `windowS`, keyed on X-Client. */
const slidingPolicy = (id: string, path: string, name: string, windowS: number): object => ({
  id,
  spec: {
    selector: { pathExact: path },
    rules: [
      { name, limit_keys: ['header:x-client'], algorithm: 'sliding_window', algorithm_config: { limit: LIMIT, window_seconds: windowS } },
    ],
  },
})
writeFileSync(
  bundle,
  JSON.stringify({
    bundle_version: 1,
    policies: [
      slidingPolicy('sliding', '/api/x', RULE, WINDOW_S),
      slidingPolicy('sliding-burst', '/api/burst', BURST_RULE, BURST_WINDOW_S),
    ],
  }),
)

/** Arrival times at the backend (epoch ms), per client. */
const arrivals = new Map<string, number[]>()
let backend: Backend
before(async () => {
  backend = await startBackend((req, res) => {
    const client = String(req.headers['x-client'])
    arrivals.set(client, [...(arrivals.get(client) ?? []), Date.now()])
    res.end('ok')
  })
})
after(async () => {
  await backend.close()
  rmSync(dir, { recursive: true, force: true })
  await deleteKeys(REDIS_URL, `sw:${RULE}:*`)
  await deleteKeys(REDIS_URL, `sw:${BURST_RULE}:*`)
})

interface Answer {
  /** When the request was sent (epoch ms). */
  sentAt: number
  status: number
  headers: Record<string, string>
}

/**
 * The stream: request i is sent at `startAt` + i × INTERVAL_MS, to the
 * gateways in turn, without waiting for earlier answers. The timers pace the
 * traffic (its shape is what is under test); nothing waits on them for a
 * result.
 */
async function stream(gateways: GatewayProcess[], client: string, startAt: number): Promise<Answer[]> {
  const answers: Promise<Answer>[] = []
  for (let i = 0; i < REQUESTS; i++) {
    const wait = startAt + i * INTERVAL_MS - Date.now()
    if (wait > 0) await sleep(wait)
    const sentAt = Date.now()
    answers.push(
      request(`${gateways[i % gateways.length]!.url}/api/x`, { headers: { 'x-client': client } }).then(async (r) => {
        await r.body.dump()
        const headers: Record<string, string> = {}
        for (const [k, v] of Object.entries(r.headers)) headers[k] = String(v)
        return { sentAt, status: r.statusCode, headers }
      }),
    )
  }
  return await Promise.all(answers)
}

/**
 * A client that spends its limit at the end of a window: one request, then
 * LIMIT − 1 at once 9 s later, one 10.3 s after the first (the next window
 * has begun, but nearly all of the previous one still counts: rejected,
 * where a fixed window would start afresh), then two at 11.5 s (one fits,
 * 10 × (1 − 1.5/10) + 1 ≤ 10; the next does not). The statuses in that
 * order, and the RateLimit-Reset and Retry-After of the reject at 10.3 s.
 */
async function endOfWindowBurst(
  gateways: GatewayProcess[],
  client: string,
): Promise<{ statuses: number[]; reset: number; retryAfter: number }> {
  let n = 0
  const one = async (): Promise<{ status: number; headers: Record<string, string> }> => {
    const r = await request(`${gateways[n++ % gateways.length]!.url}/api/burst`, { headers: { 'x-client': client } })
    await r.body.dump()
    return { status: r.statusCode, headers: r.headers as Record<string, string> }
  }
  const t0 = Date.now()
  const at = async (s: number): Promise<void> => {
    const wait = t0 + s * 1000 - Date.now()
    if (wait > 0) await sleep(wait)
  }
  const first = await one()
  await at(9)
  const burst = await Promise.all(Array.from({ length: LIMIT - 1 }, one))
  await at(10.3)
  const early = await one()
  await at(11.5)
  const fits = await one()
  const over = await one()
  return {
    statuses: [first, ...burst, early, fits, over].map((r) => r.status),
    reset: Number(early.headers['ratelimit-reset']),
    retryAfter: Number(early.headers['retry-after']),
  }
}

/** The most of `times` (ms) in any span of WINDOW_S seconds. */
function busiest(times: number[]): number {
  const t = [...times].sort((a, b) => a - b)
  let most = 0
  for (let i = 0, j = 0; i < t.length; i++) {
    while (j < t.length && t[j]! < t[i]! + WINDOW_S * 1000) j++
    most = Math.max(most, j - i)
  }
  return most
}

/**
 * What a fixed window of LIMIT per WINDOW_S (aligned on the clock, as cost_based periods) lets
 * through of requests sent at `times` (in order), had a window of the clock turned halfway between
 * the LIMIT-th and the next (the worst start for a fixed window, which a stream begun 70 % into a
 * window meets): the same gaps, moved as a whole. The gateway's sliding windows follow from a key's
 * first request, not the clock, so the stream need not wait for such an instant.
 */
function fixedWindowPasses(times: number[]): number[] {
  const limit = counterLimit(LIMIT, WINDOW_S, 0)
  const shift = 10 * WINDOW_S * 1000 - (times[LIMIT - 1]! + times[LIMIT]!) / 2
  let state: unknown
  return times.filter((t) => {
    const s = WINDOW_COUNTER_KIND.step(state as never, limit, 1, (t + shift) / 1000)
    if (s.allowed) state = s.state
    return s.allowed
  })
}

/** What the sliding window lets through of requests sent at `times`. */
function slidingPasses(times: number[]): number[] {
  const limit = slidingLimit(LIMIT, WINDOW_S)
  let state: unknown
  return times.filter((t) => {
    const s = SLIDING_WINDOW_KIND.step(state as never, limit, 1, t / 1000)
    if (s.allowed) state = s.state
    return s.allowed
  })
}

describe('sliding_window through the gateway: 10 per 5 s, a steady stream across window boundaries', () => {
  const setups: [string, () => Promise<GatewayProcess[]>][] = [
    [
      'in-process store, two workers',
      async () => [await startGateway({ FAIRVISOR_BACKEND_URL: backend.url, FAIRVISOR_CONFIG_FILE: bundle, FAIRVISOR_WORKERS: '2' })],
    ],
    [
      'Redis, two gateway processes',
      async () => {
        const env = {
          FAIRVISOR_BACKEND_URL: backend.url,
          FAIRVISOR_CONFIG_FILE: bundle,
          FAIRVISOR_STORE: REDIS_URL,
          FAIRVISOR_STORE_TIMEOUT_MS: '2000',
        }
        return await Promise.all([startGateway(env), startGateway(env)])
      },
    ],
  ]

  test('no 5 s span lets more than 11 through (a fixed window: about 20); rejects say when to come back, never too early', {
    timeout: 120_000,
  }, async () => {
    const gateways = await Promise.all(setups.map(([, start]) => start()))
    try {
      const startAt = Date.now()
      const [runs, bursts] = await Promise.all([
        Promise.all(setups.map(([name], i) => stream(gateways[i]!, `${name}-${RUN}`, startAt))),
        Promise.all(setups.map(([name], i) => endOfWindowBurst(gateways[i]!, `${name}-burst-${RUN}`))),
      ])
      for (const [i, [name]] of setups.entries()) {
        const b = bursts[i]!
        assert.deepEqual(b.statuses, [200, ...Array(LIMIT - 1).fill(200), 429, 200, 429], `${name}: ${JSON.stringify(b)}`)
        assert.equal(b.reset, 1, `${name}: one unit fits a second after the window turned (10 × (1 − 1/10) + 1 = 10)`)
        assert.ok(b.retryAfter >= 1 && b.retryAfter <= 2, `${name}: Retry-After ${b.retryAfter}`)
      }
      for (const [i, [name]] of setups.entries()) {
        const answers = runs[i]!
        const passed = arrivals.get(`${name}-${RUN}`) ?? []
        const rejected = answers.filter((a) => a.status === 429)
        assert.equal(passed.length + rejected.length, REQUESTS, `${name}: every request answered 200 (forwarded) or 429`)
        assert.equal(answers.filter((a) => a.status === 200).length, passed.length)
        // As many as the kind's maths lets through at the times the requests were sent (the store saw them a little later).
        const expected = slidingPasses(answers.map((a) => a.sentAt)).length
        assert.ok(Math.abs(passed.length - expected) <= 2, `${name}: ${passed.length} passed, ${expected} by the maths`)
        assert.ok(busiest(passed) <= LIMIT + 1, `${name}: ${busiest(passed)} arrived within ${WINDOW_S} s`)
        const fixed = busiest(fixedWindowPasses(answers.map((a) => a.sentAt)))
        assert.ok(fixed >= 2 * LIMIT - 1, `a fixed window would have let ${fixed} of the same requests through in ${WINDOW_S} s`)
        for (const r of rejected) {
          assert.equal(r.headers['x-fairvisor-reason'], 'sliding_window_exceeded')
          assert.equal(r.headers['ratelimit-limit'], String(LIMIT))
          assert.equal(r.headers['ratelimit-remaining'], '0')
          const reset = Number(r.headers['ratelimit-reset'])
          const retry = Number(r.headers['retry-after'])
          assert.ok(reset >= 1 && reset <= 2 * WINDOW_S, `RateLimit-Reset ${reset}`)
          assert.ok(Number.isInteger(retry) && retry >= reset, `${name}: Retry-After ${retry} before RateLimit-Reset ${reset}`)
        }
      }
      const counted = await metricValue(gateways[0]![0]!, 'fairvisor_decisions_total', 'reason="sliding_window_exceeded"')
      assert.ok(counted !== undefined && counted > 0, `fairvisor_decisions_total{reason="sliding_window_exceeded"} ${counted}`)
    } finally {
      for (const g of gateways.flat()) assert.equal(await g.stop(), 0)
    }
  })
})

test('fairvisor test simulates policies/sliding-window.json: 100 at once, then the previous minute leaves the window', () => {
  const samples = join(dir, 'sliding.jsonl')
  writeFileSync(
    samples,
    [
      '{"headers":{"x-api-key":"k"},"repeat":100,"at":0}',
      '{"headers":{"x-api-key":"k"},"at":1}',
      // 75 s: the previous window (the first minute) counts 100 × (1 − 15/60) = 75.
      '{"headers":{"x-api-key":"k","x-request-cost":"25"},"at":75}',
      '{"headers":{"x-api-key":"k"},"at":75}',
      '',
    ].join('\n'),
  )
  const r = spawnSync(process.execPath, [CLI, 'test', 'policies/sliding-window.json', '--requests', samples, '--format', 'json'], {
    cwd: ROOT,
    encoding: 'utf8',
    timeout: 20_000,
  })
  assert.equal(r.status, 0, r.stderr)
  const lines = r.stdout
    .trim()
    .split('\n')
    .map(
      (l) =>
        JSON.parse(l) as {
          decision: string
          reason: string
          headers: Record<string, string>
          limits: { tokens_left?: number; detail?: string }[]
        },
    )
  assert.equal(lines.length, 103)
  assert.ok(lines.slice(0, 100).every((l) => l.decision === 'allow'))
  assert.deepEqual([lines[99]!.headers['RateLimit-Remaining'], lines[99]!.limits[0]!.tokens_left], ['0', 0])
  const rejected = lines[100]!
  assert.deepEqual([rejected.decision, rejected.reason], ['reject', 'sliding_window_exceeded'])
  // One unit fits once 100 × (1 − e/60) ≤ 99 in the next window: at 60.6 s, 59.6 s after the request.
  assert.equal(rejected.headers['RateLimit-Reset'], '60')
  assert.ok(Number(rejected.headers['Retry-After']) >= 60)
  const later = lines[101]!
  assert.deepEqual(
    [later.decision, later.headers['RateLimit-Remaining'], later.limits[0]!.detail],
    ['allow', '0', 'estimate 100/100 in the last 60 s'],
  )
  assert.equal(lines[102]!.decision, 'reject')
})
