/**
 * Policy engine end to end: the real gateway process (dist/cli.js) in front of
 * a real backend, bundles written to a temp dir. Token-bucket countdown and
 * refill, response headers parsed with a strict RFC 9651 parser, no
 * half-spend across rules, shadow mode, reason hiding, no bundle, fail-open on
 * a missing key, cost headers, JWT keys and X-Forwarded-For trust.
 * (The 64-client concurrency check lives in ratelimit-load.test.ts.)
 */
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { parseItem } from 'structured-headers'
import { request } from 'undici'
import { startBackend, startGateway, type Backend, type GatewayProcess, type LogLine } from '../helpers/processes.js'

const dir = mkdtempSync(join(tmpdir(), 'fv-ratelimit-'))
after(() => rmSync(dir, { recursive: true, force: true }))

let files = 0
function bundleFile(policies: unknown[], extra: Record<string, unknown> = {}): string {
  const file = join(dir, `bundle-${++files}.json`)
  writeFileSync(file, JSON.stringify({ bundle_version: 1, policies, ...extra }))
  return file
}

function tokenBucket(name: string, keys: string[], config: Record<string, unknown>, more: Record<string, unknown> = {}) {
  return { name, limit_keys: keys, algorithm: 'token_bucket', algorithm_config: config, ...more }
}

function policy(id: string, selector: Record<string, unknown>, rules: unknown[], mode = 'enforce') {
  return { id, spec: { selector, mode, rules } }
}

interface Reply {
  status: number
  headers: Record<string, string>
  body: string
}

/** Every rate-limit header seen in this file, checked with the strict parser at the end too. */
const seen: Record<string, string>[] = []

async function get(gw: GatewayProcess, path: string, headers: Record<string, string> = {}): Promise<Reply> {
  const r = await request(gw.url + path, { headers })
  const body = await r.body.text()
  const flat: Record<string, string> = {}
  for (const [k, v] of Object.entries(r.headers)) flat[k] = Array.isArray(v) ? v.join(', ') : String(v)
  assertStructured(flat)
  seen.push(flat)
  return { status: r.statusCode, headers: flat, body }
}

function sfInteger(name: string, value: string): number {
  const [v, params] = parseItem(value)
  assert.equal(typeof v, 'number', `${name}: ${value} is not an sf-integer`)
  assert.ok(Number.isInteger(v), `${name}: ${value} is not an sf-integer`)
  assert.equal(params.size, 0, `${name}: ${value} has parameters`)
  return v as number
}

/** RFC 9651 strict parse of every rate-limit header present (docs/behaviour.md §7). */
function assertStructured(h: Record<string, string>): void {
  for (const name of ['ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset', 'retry-after']) {
    if (h[name] !== undefined) assert.ok(sfInteger(name, h[name]!) >= 0, `${name} negative`)
  }
  for (const [name, wanted] of [
    ['ratelimit', ['r', 't']],
    ['ratelimit-policy', ['q', 'w']],
  ] as const) {
    if (h[name] === undefined) continue
    const [v, params] = parseItem(h[name]!)
    assert.equal(typeof v, 'string', `${name}: item must be an sf-string (the policy id): ${h[name]}`)
    for (const p of wanted) {
      const x = params.get(p)
      assert.ok(
        typeof x === 'number' && Number.isInteger(x) && x >= 0,
        `${name}: parameter ${p} must be a non-negative integer: ${h[name]}`,
      )
    }
  }
}

function remaining(r: Reply): number | undefined {
  return r.headers['ratelimit-remaining'] === undefined ? undefined : Number(r.headers['ratelimit-remaining'])
}

async function withGateway<T>(
  env: Record<string, string | undefined>,
  backend: Backend,
  fn: (gw: GatewayProcess) => Promise<T>,
): Promise<T> {
  const gw = await startGateway({ FAIRVISOR_BACKEND_URL: backend.url, ...env })
  try {
    return await fn(gw)
  } finally {
    await gw.stop()
  }
}

/** The 429 of docs/behaviour.md §7: headers, Retry-After with jitter on top of the reset, short JSON body. */
function assertTokenBucket429(r: Reply, policyId: string, burst: number): void {
  assert.equal(r.status, 429)
  assert.equal(r.headers['x-fairvisor-reason'], 'token_bucket_exceeded')
  assert.equal(r.headers['ratelimit-limit'], String(burst))
  assert.equal(r.headers['ratelimit-remaining'], '0')
  const reset = Number(r.headers['ratelimit-reset'])
  const retry = Number(r.headers['retry-after'])
  assert.ok(reset >= 1, `reset ${reset}`)
  // Jitter adds between 0 and half of the base wait.
  assert.ok(retry >= reset && retry <= Math.ceil(reset * 1.5), `retry-after ${retry} vs reset ${reset}`)
  const [id, params] = parseItem(r.headers.ratelimit!)
  assert.equal(id, policyId)
  assert.equal(params.get('r'), 0)
  assert.equal(params.get('t'), reset)
  assert.match(r.headers['content-type'] ?? '', /^application\/json/)
  assert.ok(r.body.length < 200, `429 body is short: ${r.body}`)
  const body = JSON.parse(r.body) as Record<string, unknown>
  assert.equal(body.error, 'too_many_requests')
  assert.equal(body.reason, 'token_bucket_exceeded')
}

let backend: Backend
before(async () => {
  backend = await startBackend()
})
after(() => backend.close())

/**
 * A fresh key of a bucket (burst 10, 1 token/s) as the client can know it: before request n is
 * decided it holds 10 − (allowed so far) + the refill since the first was decided, which the
 * client brackets between (n sent − first answered) and (n answered − first sent). An allowed
 * answer's RateLimit-Remaining (its tokens after its own, rounded down) lies in that bracket; a
 * reject needs its low end under one token. On an idle machine the bracket is a few ms wide and
 * the answers are exactly the countdown (9…0, then 429); a loaded one may add a token on the way.
 */
function countdown(burst: number, perSecond: number) {
  let firstSent = 0
  let firstAnswered = 0
  let allowed = 0
  return {
    get allowed() {
      return allowed
    },
    async next(send: () => Promise<Reply>): Promise<Reply> {
      const sent = performance.now()
      const r = await send()
      const answered = performance.now()
      if (allowed === 0 && firstSent === 0) [firstSent, firstAnswered] = [sent, answered]
      const low = burst - allowed + (perSecond * Math.max(0, sent - firstAnswered)) / 1000
      const high = burst - allowed + (perSecond * (answered - firstSent)) / 1000
      const what = `request ${allowed + 1} after ${allowed} allowed: ${low.toFixed(2)} to ${high.toFixed(2)} tokens before it`
      if (r.status === 200) {
        const left = remaining(r)!
        assert.ok(
          left >= Math.floor(Math.min(burst, low) - 1) && left <= Math.floor(Math.min(burst, high) - 1),
          `RateLimit-Remaining ${left}, ${what}`,
        )
        allowed++
      } else assert.ok(low < 1, `a reject with ${what}`)
      return r
    },
  }
}

// Both cases wait 4 s for a refill: they run at once, each with its own gateway and its own backend (whose
// count of requests it checks).
describe('token bucket countdown through the gateway', { concurrency: true }, () => {
  for (const [label, config] of [
    ['rps alias', { rps: 1, burst: 10 }],
    ['tokens_per_second', { tokens_per_second: 1, burst: 10 }],
  ] as const) {
    test(`${label}: 9…0 then 429, and after 4 s 3, 2, 1, 0 then 429; rejects never reach the backend`, async (t) => {
      const file = bundleFile([policy('api', { pathPrefix: '/' }, [tokenBucket('per_user', ['header:x-user'], config)])])
      const backend = await startBackend()
      t.after(() => backend.close())
      await withGateway({ FAIRVISOR_CONFIG_FILE: file }, backend, async (gw) => {
        const before = backend.count
        const alice = countdown(10, 1)
        const ask = (): Promise<Reply> => alice.next(() => get(gw, '/items', { 'x-user': 'alice' }))
        const seenRemaining: number[] = []
        for (let i = 0; i < 10; i++) {
          const r = await ask()
          assert.equal(r.status, 200, r.body)
          assert.equal(r.headers['retry-after'], undefined)
          assert.equal(r.headers['x-fairvisor-reason'], undefined)
          assert.equal(r.headers['ratelimit-limit'], '10')
          assert.equal(r.headers['ratelimit-policy'], '"api";q=10;w=10')
          seenRemaining.push(remaining(r)!)
        }
        // 9…0 here, exactly, unless the ten took the machine a second or more (then a refill shows).
        let rejected = await ask()
        while (rejected.status === 200) rejected = await ask()
        assertTokenBucket429(rejected, 'api', 10)
        assert.equal(backend.count - before, alice.allowed, 'the 429 was answered without the backend')

        // Another key has its own full bucket.
        assert.equal(remaining(await get(gw, '/items', { 'x-user': 'bob' })), 9)

        await sleep(4000)
        // 3, 2, 1, 0 then 429 (the refill of 4 s), within what the bracket allows.
        const after4s: number[] = []
        let r = await ask()
        for (; r.status === 200; r = await ask()) after4s.push(remaining(r)!)
        assert.ok(after4s.length >= 4, `4 s of refill: ${after4s.join(', ')}`)
        assertTokenBucket429(r, 'api', 10)
        assert.equal(backend.count - before, alice.allowed + 1)
        console.log(`${label}: ${seenRemaining.join(', ')}, 429; after 4 s ${after4s.join(', ')}, 429`)
      })
    })
  }
})

describe('several limits on one request', () => {
  test('a reject by a later rule (same policy or a later policy) leaves the earlier buckets untouched', async () => {
    const slow = { tokens_per_second: 0.001 } // no refill during the test
    const file = bundleFile([
      policy('a_api', { pathPrefix: '/' }, [
        tokenBucket('first', ['header:x-user'], { ...slow, burst: 10 }),
        tokenBucket('second', ['header:x-user'], { ...slow, burst: 2 }, { match: { 'header:x-tier': 'small' } }),
      ]),
      // A second policy on /both/ only, evaluated after a_api (id order).
      policy('b_both', { pathPrefix: '/both/' }, [tokenBucket('third', ['header:x-user'], { ...slow, burst: 1 })]),
    ])
    await withGateway({ FAIRVISOR_CONFIG_FILE: file }, backend, async (gw) => {
      const small = { 'x-user': 'carol', 'x-tier': 'small' }
      // Allowed requests carry the most restrictive limit: rule "second".
      assert.equal(remaining(await get(gw, '/x', small)), 1)
      assert.equal(remaining(await get(gw, '/x', small)), 0)
      for (let i = 0; i < 3; i++) {
        const r = await get(gw, '/x', small)
        assertTokenBucket429(r, 'a_api', 2)
      }
      // Only rule "first" applies: 10 - 2 allowed - 1 now. Half-spend would show 4.
      let r = await get(gw, '/x', { 'x-user': 'carol' })
      assert.equal(r.status, 200)
      assert.equal(r.headers['ratelimit-limit'], '10')
      assert.equal(remaining(r), 7)

      // Across policies: b_both allows once then rejects; a_api's "first" is charged only for the allow.
      r = await get(gw, '/both/y', { 'x-user': 'dave' })
      assert.equal(r.status, 200)
      assert.equal(remaining(r), 0) // b_both's bucket is the most restrictive
      for (let i = 0; i < 3; i++) assertTokenBucket429(await get(gw, '/both/y', { 'x-user': 'dave' }), 'b_both', 1)
      r = await get(gw, '/x', { 'x-user': 'dave' })
      assert.equal(remaining(r), 8)
    })
  })
})

function wouldRejects(gw: GatewayProcess): LogLine[] {
  return gw.logs.filter((l) => l.event === 'would_reject' || l.msg === 'would_reject')
}

async function waitForCount(gw: GatewayProcess, n: number): Promise<LogLine[]> {
  const deadline = Date.now() + 3000
  while (wouldRejects(gw).length < n && Date.now() < deadline) await sleep(20)
  await sleep(150) // and no more than n
  return wouldRejects(gw)
}

describe('shadow mode', () => {
  test('a shadow policy never rejects, adds no reject headers, and logs one would_reject per would-be reject', async () => {
    const file = bundleFile([
      policy('watch', { pathPrefix: '/' }, [tokenBucket('per_user', ['header:x-user'], { tokens_per_second: 0.001, burst: 2 })], 'shadow'),
    ])
    await withGateway({ FAIRVISOR_CONFIG_FILE: file }, backend, async (gw) => {
      const before = backend.count
      for (let i = 0; i < 6; i++) {
        const r = await get(gw, '/s', { 'x-user': 'erin' })
        assert.equal(r.status, 200)
        assert.equal(r.headers['retry-after'], undefined)
        assert.equal(r.headers['x-fairvisor-reason'], undefined)
        assert.equal(r.headers['ratelimit-remaining'], undefined, 'shadow limits add no headers (docs/policies.md)')
      }
      assert.equal(backend.count - before, 6)
      const lines = await waitForCount(gw, 4)
      assert.equal(lines.length, 4)
      for (const l of lines) {
        assert.equal(l.policy, 'watch')
        assert.equal(l.rule, 'per_user')
        assert.equal(l.reason, 'token_bucket_exceeded')
        assert.match(String(l.key), /erin/)
        assert.match(String(l.key), /^shadow:/)
      }
    })
  })

  test('shadow counters are separate from an enforce policy with the same rule name', async () => {
    const rule = () => tokenBucket('same_name', ['header:x-user'], { tokens_per_second: 0.001, burst: 5 })
    const file = bundleFile([
      policy('enforced', { pathPrefix: '/both/' }, [rule()]),
      policy('shadowed', { pathPrefix: '/' }, [rule()], 'shadow'),
    ])
    await withGateway({ FAIRVISOR_CONFIG_FILE: file }, backend, async (gw) => {
      // Spend 3 of the shadow bucket only.
      for (let i = 0; i < 3; i++) assert.equal((await get(gw, '/only-shadow', { 'x-user': 'fred' })).status, 200)
      // The enforce bucket is still full: a shared counter would start at 1.
      const rem: number[] = []
      for (let i = 0; i < 5; i++) {
        const r = await get(gw, '/both/z', { 'x-user': 'fred' })
        assert.equal(r.status, 200)
        rem.push(remaining(r)!)
      }
      assert.deepEqual(rem, [4, 3, 2, 1, 0])
      // The shadow bucket (5) was spent by 3 + 2 requests; the next 3 would have been rejected.
      const lines = await waitForCount(gw, 3)
      assert.equal(lines.length, 3)
      assert.ok(
        lines.every((l) => l.policy === 'shadowed' && l.rule === 'same_name' && l.key === 'shadow:tb:same_name:fred'),
        JSON.stringify(lines),
      )
      assertTokenBucket429(await get(gw, '/both/z', { 'x-user': 'fred' }), 'enforced', 5)
    })
  })
})

describe('gateway settings and request inputs', () => {
  test('FAIRVISOR_EXPOSE_REASON=false hides X-Fairvisor-Reason and the body reason', async () => {
    const file = bundleFile([
      policy('api', { pathPrefix: '/' }, [tokenBucket('r', ['header:x-user'], { tokens_per_second: 0.001, burst: 1 })]),
    ])
    await withGateway({ FAIRVISOR_CONFIG_FILE: file, FAIRVISOR_EXPOSE_REASON: 'false' }, backend, async (gw) => {
      assert.equal((await get(gw, '/', { 'x-user': 'g' })).status, 200)
      const r = await get(gw, '/', { 'x-user': 'g' })
      assert.equal(r.status, 429)
      assert.equal(r.headers['x-fairvisor-reason'], undefined)
      assert.ok(r.headers['retry-after'])
      assert.equal((JSON.parse(r.body) as Record<string, unknown>).reason, undefined)
    })
  })

  test('no bundle: 503 no_bundle_loaded on every proxied path, backend never reached', async () => {
    await withGateway({ FAIRVISOR_CONFIG_FILE: undefined }, backend, async (gw) => {
      const before = backend.count
      for (const path of ['/', '/a', '/a/b/c', '/x?y=1', '/livez-not']) {
        const r = await get(gw, path)
        assert.equal(r.status, 503, path)
        assert.equal(r.headers['x-fairvisor-reason'], 'no_bundle_loaded')
        assert.equal((JSON.parse(r.body) as Record<string, unknown>).reason, 'no_bundle_loaded')
      }
      const post = await request(`${gw.url}/p`, { method: 'POST', body: 'x' })
      assert.equal(post.statusCode, 503)
      await post.body.text()
      assert.equal(backend.count, before)
      const ready = await request(`${gw.url}/readyz`)
      assert.equal(ready.statusCode, 503)
      await ready.body.text()
    })
  })

  test('missing limit key: allowed (fail-open) and counted in fairvisor_descriptor_missing_total', async () => {
    const file = bundleFile([
      policy('api', { pathPrefix: '/' }, [tokenBucket('r', ['header:x-api-key'], { tokens_per_second: 0.001, burst: 1 })]),
    ])
    await withGateway({ FAIRVISOR_CONFIG_FILE: file }, backend, async (gw) => {
      for (let i = 0; i < 3; i++) {
        const r = await get(gw, '/')
        assert.equal(r.status, 200)
        assert.equal(r.headers['ratelimit-remaining'], undefined)
      }
      // An empty value is missing too.
      assert.equal((await get(gw, '/', { 'x-api-key': '' })).status, 200)
      const metrics = await (await request(`${gw.url}/metrics`)).body.text()
      const line = metrics
        .split('\n')
        .find((l) => l.startsWith('fairvisor_descriptor_missing_total{') && l.includes('key="header:x-api-key"'))
      assert.ok(line, metrics)
      assert.equal(Number(line.split(' ').pop()), 4)
    })
  })

  test('cost header: negative, garbage, zero or absent → default_cost; larger than burst → 429', async () => {
    const file = bundleFile([
      policy('api', { pathPrefix: '/' }, [
        tokenBucket('r', ['header:x-user'], { tokens_per_second: 0.001, burst: 10, cost_source: 'header:x-cost', default_cost: 2 }),
      ]),
    ])
    await withGateway({ FAIRVISOR_CONFIG_FILE: file }, backend, async (gw) => {
      const steps: [Record<string, string>, number][] = [
        [{ 'x-cost': '-5' }, 8],
        [{ 'x-cost': 'abc' }, 6],
        [{ 'x-cost': '0' }, 4],
        [{}, 2],
        [{ 'x-cost': '1' }, 1],
      ]
      for (const [h, want] of steps) {
        const r = await get(gw, '/', { 'x-user': 'h', ...h })
        assert.equal(r.status, 200, JSON.stringify(h))
        assert.equal(remaining(r), want, JSON.stringify(h))
      }
      assertTokenBucket429(await get(gw, '/', { 'x-user': 'h', 'x-cost': '3' }), 'api', 10)
      assertTokenBucket429(await get(gw, '/', { 'x-user': 'fresh', 'x-cost': '11' }), 'api', 10)
      // The failed request spent nothing.
      assert.equal(remaining(await get(gw, '/', { 'x-user': 'h', 'x-cost': '1' })), 0)
    })
  })

  test('jwt: claims key the bucket; malformed tokens skip the rule and never cause a 5xx', async () => {
    const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url')
    const jwt = (payload: unknown) => `Bearer ${b64({ alg: 'none', typ: 'JWT' })}.${b64(payload)}.sig`
    const file = bundleFile([
      policy('api', { pathPrefix: '/' }, [tokenBucket('per_sub', ['jwt:sub'], { tokens_per_second: 0.001, burst: 2 })]),
    ])
    await withGateway({ FAIRVISOR_CONFIG_FILE: file }, backend, async (gw) => {
      const alice = { authorization: jwt({ sub: 'alice', iat: 1 }) }
      assert.equal(remaining(await get(gw, '/', alice)), 1)
      assert.equal(remaining(await get(gw, '/', alice)), 0)
      assertTokenBucket429(await get(gw, '/', alice), 'api', 2)
      assert.equal(remaining(await get(gw, '/', { authorization: jwt({ sub: 'bob' }) })), 1)
      assert.equal(remaining(await get(gw, '/', { authorization: jwt({ sub: 42 }) })), 1, 'numeric claims key as their JSON text')
      const malformed = [
        'Bearer not-a-jwt',
        'Bearer a.b',
        'Bearer a.!!!.c',
        `Bearer x.${Buffer.from('not json').toString('base64url')}.y`,
        `Bearer x.${b64([1, 2])}.y`,
        `Bearer x.${b64({ sub: { nested: true } })}.y`,
        `Bearer x.${b64({ sub: '' })}.y`,
        `Bearer x.${b64({ other: 'x' })}.y`,
        `Basic ${Buffer.from('u:p').toString('base64')}`,
        `Bearer ${'a'.repeat(2000)}.${'b'.repeat(2000)}.c`,
      ]
      for (const authorization of malformed) {
        for (let i = 0; i < 3; i++) {
          const r = await get(gw, '/', { authorization })
          assert.equal(r.status, 200, `${authorization.slice(0, 40)}: ${r.body}`)
          assert.equal(r.headers['ratelimit-remaining'], undefined, 'rule skipped')
        }
      }
    })
  })

  test('X-Forwarded-For keys ip:address only when the peer is a trusted proxy', async () => {
    const file = bundleFile([
      policy('api', { pathPrefix: '/' }, [tokenBucket('per_ip', ['ip:address'], { tokens_per_second: 0.001, burst: 1 })]),
    ])
    await withGateway({ FAIRVISOR_CONFIG_FILE: file }, backend, async (gw) => {
      // Untrusted: every request is the socket peer, whatever it claims.
      assert.equal((await get(gw, '/', { 'x-forwarded-for': '203.0.113.1' })).status, 200)
      assert.equal((await get(gw, '/', { 'x-forwarded-for': '203.0.113.2' })).status, 429)
    })
    await withGateway({ FAIRVISOR_CONFIG_FILE: file, FAIRVISOR_TRUSTED_PROXIES: '127.0.0.1' }, backend, async (gw) => {
      assert.equal((await get(gw, '/', { 'x-forwarded-for': '203.0.113.1' })).status, 200)
      assert.equal((await get(gw, '/', { 'x-forwarded-for': '203.0.113.2' })).status, 200)
      // Right-most untrusted hop: the trusted 127.0.0.1 hop is skipped.
      assert.equal((await get(gw, '/', { 'x-forwarded-for': '203.0.113.2, 127.0.0.1' })).status, 429)
      assert.equal((await get(gw, '/', { 'x-forwarded-for': '198.51.100.9, 203.0.113.1' })).status, 429)
      // A garbage hop stops the walk: the trusted peer itself is the key (its first request passes).
      assert.equal((await get(gw, '/', { 'x-forwarded-for': 'evil' })).status, 200)
      assert.equal((await get(gw, '/')).status, 429)
    })
  })
})

test('every RateLimit header seen in this file parsed strictly', () => {
  const withHeaders = seen.filter((h) => h.ratelimit !== undefined)
  assert.ok(withHeaders.length > 40, `only ${withHeaders.length} responses carried RateLimit`)
  for (const h of seen) assertStructured(h)
})
