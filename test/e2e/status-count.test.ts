/**
 * Counting by response status through the real gateway (reverse proxy mode),
 * on the in-process store with two worker threads and on Redis (a
 * redis-server this file owns) with two gateway processes sharing it. The
 * backend answers the status a request asks for in `x-status`.
 *
 * - count_statuses ["401"] on a budget of 3: unlimited 200s pass; after
 *   three 401s the key is rejected (whatever it would have been answered);
 *   10 requests at once on a fresh key, held at the backend, never pass the
 *   budget together: 3 are forwarded, 7 rejected;
 * - refund_statuses ["5xx"] on a budget of 3: 502s and 503s, and the
 *   gateway's own 502 when the backend is unreachable, burn nothing; 2xx
 *   and 4xx do.
 */
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import {
  freePort,
  metricValue,
  startBackend,
  startGateway,
  startGateways,
  type Backend,
  type GatewayProcess,
} from '../helpers/processes.js'
import { startRedis, type RedisServer } from '../helpers/redis-servers.js'
import { waitFor } from '../helpers/wait.js'

const dir = mkdtempSync(join(tmpdir(), 'fv-status-'))
after(() => rmSync(dir, { recursive: true, force: true }))

const rule = (name: string, extra: object): object => ({
  name,
  limit_keys: ['header:x-user'],
  algorithm: 'token_bucket',
  algorithm_config: { tokens_per_second: 0.001, burst: 3 },
  ...extra,
})

function bundleFile(name: string): string {
  const file = join(dir, `${name}.json`)
  writeFileSync(
    file,
    JSON.stringify({
      bundle_version: 1,
      policies: [
        { id: 'login', spec: { selector: { pathPrefix: '/login/' }, rules: [rule('failed_logins', { count_statuses: ['401'] })] } },
        { id: 'api', spec: { selector: { pathPrefix: '/api/' }, rules: [rule('api_calls', { refund_statuses: ['5xx'] })] } },
      ],
    }),
  )
  return file
}

/** Requests the backend saw, by x-id; a request with `x-hold` is answered only when released. */
const seen = new Set<string>()
const waiting: (() => void)[] = []
let backend: Backend
before(async () => {
  backend = await startBackend((req, res) => {
    seen.add(String(req.headers['x-id']))
    const answer = (): void => {
      res.statusCode = Number(req.headers['x-status'] ?? 200)
      res.end('x')
    }
    if (req.headers['x-hold'] !== undefined) waiting.push(answer)
    else answer()
  })
})
after(() => backend.close())

let run = 0
const user = (label: string): string => `${label}-${process.pid}-${run++}`

async function send(gw: GatewayProcess, path: string, u: string, status: number, extra: Record<string, string> = {}): Promise<number> {
  const r = await fetch(`${gw.url}${path}`, { headers: { 'x-user': u, 'x-status': String(status), 'x-id': `${u}-${run++}`, ...extra } })
  await r.arrayBuffer()
  return r.status
}

function statusCases(gws: () => GatewayProcess[]): void {
  const at = (i: number): GatewayProcess => gws()[i % gws().length]!

  it('count_statuses ["401"]: unlimited 200s pass; after its budget of three 401s the key is rejected', async () => {
    const u = user('login')
    const refunds = async (): Promise<number> => {
      let sum = 0
      for (const gw of gws()) sum += (await metricValue(gw, 'fairvisor_status_refunds_total', 'policy="login"')) ?? 0
      return sum
    }
    const before = await refunds()
    for (let i = 0; i < 20; i++) assert.equal(await send(at(i), '/login/x', u, 200), 200, `successful login ${i + 1}`)
    // A 200's charge is given back after its response, in a store call of its own: until then it
    // holds budget (as any request in flight does). Wait for the gateways to have sent them all.
    await waitFor(async () => (await refunds()) - before >= 20, 'the 20 successful logins given back')
    for (let i = 0; i < 3; i++) assert.equal(await send(at(i), '/login/x', u, 401), 401, `failed login ${i + 1}`)
    assert.equal(await send(at(0), '/login/x', u, 401), 429, 'a fourth failure is rejected before it reaches the backend')
    assert.equal(await send(at(1), '/login/x', u, 200), 429, 'the key used its budget: rejected whatever its password')
    const other = user('login-other')
    assert.equal(await send(at(0), '/login/x', other, 200), 200, 'another key is not affected')
  })

  it('count_statuses: 10 requests at once never pass the budget together (3 forwarded, 7 rejected)', async () => {
    const u = user('burst')
    const before = seen.size
    let answered = 0
    const sent = Array.from({ length: 10 }, (_, i) =>
      send(at(i), '/login/x', u, 401, { 'x-hold': '1' }).then((s) => {
        answered++
        return s
      }),
    )
    // The rejects are answered at once; the forwarded ones wait at the backend until released.
    await waitFor(() => answered === 7 && waiting.length === 3, 'seven answered, three held at the backend')
    for (const release of waiting.splice(0)) release()
    const all = await Promise.all(sent)
    assert.equal(all.filter((s) => s === 401).length, 3)
    assert.equal(all.filter((s) => s === 429).length, 7)
    assert.equal(seen.size - before, 3, 'only three reached the backend')
  })

  it('refund_statuses ["5xx"]: 502s and 503s burn no budget; 2xx and 4xx do', async () => {
    const u = user('api')
    for (let i = 0; i < 10; i++)
      assert.equal(await send(at(i), '/api/x', u, i % 2 ? 502 : 503), i % 2 ? 502 : 503, `backend failure ${i + 1}`)
    assert.equal(await send(at(0), '/api/x', u, 200), 200)
    assert.equal(await send(at(1), '/api/x', u, 404), 404)
    assert.equal(await send(at(0), '/api/x', u, 200), 200)
    assert.equal(await send(at(1), '/api/x', u, 200), 429, 'three kept charges used the budget')
    assert.ok(((await metricValue(at(0), 'fairvisor_status_refunds_total', 'policy="api"')) ?? 0) >= 1, 'refunds are counted')
  })
}

describe('in-process store, two worker threads', () => {
  let gw: GatewayProcess
  before(async () => {
    gw = await startGateway({ FAIRVISOR_BACKEND_URL: backend.url, FAIRVISOR_CONFIG_FILE: bundleFile('memory'), FAIRVISOR_WORKERS: '2' })
  })
  after(() => gw.stop())
  statusCases(() => [gw])
})

describe('Redis, two gateway processes', () => {
  let redis: RedisServer
  let gws: GatewayProcess[] = []
  before(async () => {
    redis = await startRedis()
    // Not about deadlines (redis-faults.test.ts is): a loaded machine's Redis call may pass the 50 ms default.
    const env = {
      FAIRVISOR_BACKEND_URL: backend.url,
      FAIRVISOR_CONFIG_FILE: bundleFile('redis'),
      FAIRVISOR_STORE: redis.url,
      FAIRVISOR_REDIS_TIMEOUT_MS: '2000',
      FAIRVISOR_FAIL_POLICY: 'closed',
    }
    gws = await startGateways([env, env])
  })
  after(async () => {
    await Promise.all(gws.map((g) => g.stop()))
    await redis.stop()
  })
  statusCases(() => gws)
})

describe('refund_statuses and the gateway’s own answers', () => {
  it('an unreachable backend’s 502 gives the charge back too', async () => {
    const port = await freePort()
    const gw = await startGateway({ FAIRVISOR_BACKEND_URL: `http://127.0.0.1:${port}`, FAIRVISOR_CONFIG_FILE: bundleFile('dead') })
    try {
      const u = user('dead')
      for (let i = 0; i < 6; i++) assert.equal(await send(gw, '/api/x', u, 200), 502, `attempt ${i + 1}`)
      assert.equal(await metricValue(gw, 'fairvisor_status_refunds_total', 'policy="api"'), 6)
    } finally {
      await gw.stop()
    }
  })
})
