/**
 * A sliding window with a delay instead of reject (`max_delay_ms`,
 * docs/algorithms.md) through the real gateway: on the in-process store
 * with two worker threads, and on Redis with two gateway processes sharing
 * it (requests alternate between them).
 *
 * - 8 requests at once on 5 per 1 s, max_delay_ms 2000 all get 200: the
 *   backend sees 5 at once and the others as this window's 5 leave the next
 *   one, about 1.2, 1.4 and 1.6 s later; 20 at once: 9 pass (5, and 4 held
 *   until 1.8 s), the excess is rejected at once, 429 sliding_window_exceeded
 *   with Retry-After;
 * - a held request whose client leaves is never forwarded and gives its
 *   weight back: the next request is held in its place instead of refused;
 * - the decision service holds its answer until the wait is over, and
 *   FAIRVISOR_MAX_DELAYED bounds the held requests (past it the window's
 *   reject).
 */
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { request } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { metricValue, startBackend, startGateway, type Backend, type GatewayProcess } from '../helpers/processes.js'
import { deleteKeys } from '../helpers/redis-servers.js'
import { waitFor } from '../helpers/wait.js'

const REDIS_URL = process.env.FAIRVISOR_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379'
const RUN = `${process.pid.toString(36)}${Date.now().toString(36)}`

const dir = mkdtempSync(join(tmpdir(), 'fv-sw-delay-'))
after(() => rmSync(dir, { recursive: true, force: true }))

const rule = (name: string, limit: number, windowS: number, maxDelayMs: number): object => ({
  name: `${name}_${RUN}`,
  limit_keys: ['header:x-user'],
  algorithm: 'sliding_window',
  algorithm_config: { limit, window_seconds: windowS, max_delay_ms: maxDelayMs },
})
const bundleFile = join(dir, 'bundle.json')
writeFileSync(
  bundleFile,
  JSON.stringify({
    bundle_version: 1,
    policies: [
      { id: 'smooth', spec: { selector: { pathPrefix: '/smooth/' }, rules: [rule('smooth', 5, 1, 2000)] } },
      // 2 per 2 s: the third is held 3 s (long enough to leave in the middle of), a fourth would be due at the end of the next window.
      { id: 'slow', spec: { selector: { pathPrefix: '/slow/' }, rules: [rule('slow', 2, 2, 4000)] } },
    ],
  }),
)

/** When the backend saw each request (by its x-id). */
const seen = new Map<string, number>()
let backend: Backend
before(async () => {
  backend = await startBackend((req, res) => {
    seen.set(String(req.headers['x-id']), performance.now())
    res.end('ok')
  })
})
after(() => backend.close())

interface Answer {
  status: number
  ms: number
  retryAfter: string | undefined
  reason: string | undefined
}

/** One request on a connection of its own; resolves with its status and how long the answer took. */
function send(gw: GatewayProcess, path: string, user: string, id: string): Promise<Answer> {
  const start = performance.now()
  return new Promise((resolve, reject) => {
    const r = request(`${gw.url}${path}`, { headers: { 'x-user': user, 'x-id': id }, agent: false }, (res) => {
      res.resume()
      res.on('end', () =>
        resolve({
          status: res.statusCode!,
          ms: performance.now() - start,
          retryAfter: res.headers['retry-after'] as string | undefined,
          reason: res.headers['x-fairvisor-reason'] as string | undefined,
        }),
      )
    })
    r.on('error', reject)
    r.end()
  })
}

let run = 0
const user = (label: string): string => `${label}-${RUN}-${run++}`

/** The cases, on gateways that share one store (`gws`: one or two processes; requests alternate between them). */
function delayCases(gws: () => GatewayProcess[]): void {
  const at = (i: number): GatewayProcess => gws()[i % gws().length]!

  it('8 requests at once on 5 per 1 s, max_delay_ms 2000: all 200, 5 forwarded at once, the others about 1.2, 1.4 and 1.6 s later', async () => {
    const u = user('eight')
    const sent = performance.now()
    const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => send(at(i), '/smooth/x', u, `${u}-${i}`)))
    assert.deepEqual(
      answers.map((a) => a.status),
      Array(8).fill(200),
    )
    // The window starts when the store sees the first request, after they were sent: a held one is forwarded
    // its wait after that (the store's clock and ours are the machine's; 5 ms for the timers' rounding).
    const after = Array.from({ length: 8 }, (_, i) => seen.get(`${u}-${i}`)! - sent).sort((a, b) => a - b)
    for (const [k, ms] of [1200, 1400, 1600].entries())
      assert.ok(after[5 + k]! >= ms - 5, `request ${6 + k} forwarded ${Math.round(after[5 + k]!)} ms after they were sent`)
    assert.ok(after[4]! < 1200, `the first five are not held: the fifth forwarded after ${Math.round(after[4]!)} ms`)
    const last = Math.max(...answers.map((a) => a.ms))
    assert.ok(last >= 1595 && last < 3500, `the last answer came after ${Math.round(last)} ms`)
  })

  it('20 at once: 9 pass (5 at once, 4 held), the excess is rejected at once, sliding_window_exceeded with Retry-After', async () => {
    const u = user('twenty')
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => send(at(i), '/smooth/x', u, `${u}-${i}`)))
    const ok = answers.filter((a) => a.status === 200)
    const rejected = answers.filter((a) => a.status === 429)
    // 9 exactly when the 20 arrive within the window's first second; one more may be held if a loaded machine spreads them past it.
    assert.ok(ok.length >= 9 && ok.length <= 10, `${ok.length} passed`)
    assert.equal(ok.length + rejected.length, 20)
    for (const r of rejected) {
      assert.equal(r.reason, 'sliding_window_exceeded')
      assert.ok(Number(r.retryAfter) >= 1, `Retry-After ${r.retryAfter}`)
      assert.ok(r.ms < 1000, `a reject is not held: ${Math.round(r.ms)} ms`)
    }
    assert.ok(Math.max(...ok.map((a) => a.ms)) < 3500, 'no request is held past max_delay_ms (plus slack)')
  })

  it('a held request whose client leaves is never forwarded and gives its weight back: the next one is held in its place, not refused', async () => {
    const u = user('gone')
    const gw = at(0)
    const abandonedBefore = (await metricValue(gw, 'fairvisor_delayed_requests_total', 'result="abandoned"')) ?? 0
    for (let i = 0; i < 2; i++) assert.equal((await send(gw, '/slow/x', u, `${u}-${i}`)).status, 200)
    // The third fits once the window's two leave the next one: held about 3 s. Its client hangs up while it is held.
    const held = request(`${gw.url}/slow/x`, { headers: { 'x-user': u, 'x-id': `${u}-held` }, agent: false })
    held.on('error', () => undefined)
    held.end()
    await waitFor(async () => ((await metricValue(gw, 'fairvisor_delayed_held')) ?? 0) >= 1, 'the request is held')
    held.destroy()
    await waitFor(
      async () => ((await metricValue(gw, 'fairvisor_delayed_requests_total', 'result="abandoned"')) ?? 0) > abandonedBefore,
      'the hold is abandoned',
    )
    // Without the give-back this one would be due at the end of the next window (4 s): refused at once.
    const next = await send(gw, '/slow/x', u, `${u}-next`)
    assert.equal(next.status, 200)
    assert.ok(next.ms >= 1000 && next.ms < 5000, `the next request was held ${Math.round(next.ms)} ms`)
    assert.equal(seen.has(`${u}-held`), false, 'the abandoned request never reached the backend')
  })
}

describe('in-process store, two worker threads', () => {
  let gw: GatewayProcess
  before(async () => {
    gw = await startGateway({ FAIRVISOR_BACKEND_URL: backend.url, FAIRVISOR_CONFIG_FILE: bundleFile, FAIRVISOR_WORKERS: '2' })
  })
  after(() => gw.stop())
  delayCases(() => [gw])
})

describe('Redis, two gateway processes', () => {
  let gws: GatewayProcess[] = []
  before(async () => {
    // A busy machine's Redis may take more than the default 50 ms: a call past it would be let through unlimited.
    const env = {
      FAIRVISOR_BACKEND_URL: backend.url,
      FAIRVISOR_CONFIG_FILE: bundleFile,
      FAIRVISOR_STORE: REDIS_URL,
      FAIRVISOR_STORE_TIMEOUT_MS: '2000',
      FAIRVISOR_FAIL_POLICY: 'closed',
    }
    gws = await Promise.all([startGateway(env), startGateway(env)])
  })
  after(async () => {
    await Promise.all(gws.map((g) => g.stop()))
    await deleteKeys(REDIS_URL, `sw:*_${RUN}:*`)
  })
  delayCases(() => gws)
})

describe('the decision service', () => {
  it('/v1/decision holds its answer until the wait is over; past FAIRVISOR_MAX_DELAYED held answers, the window’s reject', async () => {
    const gw = await startGateway({ FAIRVISOR_MODE: 'decision_service', FAIRVISOR_CONFIG_FILE: bundleFile, FAIRVISOR_MAX_DELAYED: '2' })
    try {
      const u = user('decision')
      const call = async (): Promise<{ status: number; ms: number; reason: string | null }> => {
        const start = performance.now()
        const r = await fetch(`${gw.url}/v1/decision`, {
          method: 'POST',
          headers: { 'x-original-uri': '/smooth/x', 'x-original-method': 'GET', 'x-user': u },
        })
        await r.arrayBuffer()
        return { status: r.status, ms: performance.now() - start, reason: r.headers.get('x-fairvisor-reason') }
      }
      const answers = await Promise.all(Array.from({ length: 8 }, call))
      const ok = answers.filter((a) => a.status === 200)
      assert.equal(ok.length, 7, 'the 5 that fit, then two held')
      const refused = answers.filter((a) => a.status === 429)
      assert.deepEqual(
        refused.map((a) => a.reason),
        ['sliding_window_exceeded'],
      )
      assert.ok(refused[0]!.ms < 1000, `refused at once: ${Math.round(refused[0]!.ms)} ms`)
      const slowest = Math.max(...ok.map((a) => a.ms))
      assert.ok(slowest >= 1340 && slowest < 3500, `the last answer after ${Math.round(slowest)} ms`)
      assert.equal(await metricValue(gw, 'fairvisor_delayed_requests_total', 'result="refused"'), 1)
      assert.equal(await metricValue(gw, 'fairvisor_delayed_requests_total', 'result="forwarded"'), 2)
    } finally {
      await gw.stop()
    }
  })
})
