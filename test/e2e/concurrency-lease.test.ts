/**
 * A `concurrency` rule where the gateway does not see a request end: the
 * gateway validates its bundle for its own mode and gRPC listener, as
 * `fairvisor validate --mode --grpc` does.
 * - decision_service mode with ext_authz on FAIRVISOR_GRPC_PORT: a rule that
 *   gives its slot back at the exchange's end is dropped at start-up (logged
 *   at the pointer of `release`) and limits nothing; a `"release": "lease"`
 *   rule holds each slot for its lease, one counter for /v1/decision and
 *   ext_authz: `max_concurrent` answers pass, the next is 429
 *   concurrency_exceeded, and the slots are free again within
 *   `lease_seconds`, not before two thirds of it;
 * - reverse proxy with FAIRVISOR_GRPC_PORT: the same rule is dropped (ext_authz
 *   decides on the bundle too); without the gRPC listener it loads and limits.
 */
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { after, before, it } from 'node:test'
import { checkRequest, grpcClients } from '../helpers/grpc-client.js'
import { startBackend, startGateway, type Backend, type GatewayProcess, type LogLine } from '../helpers/processes.js'
import { waitFor } from '../helpers/wait.js'

const LEASE_S = 3
/** A lease bucket's expiry margin (a thousandth of a bucket) and a clock read a moment apart. */
const SLACK_S = 0.05
const RELEASE_POINTER = '/policies/0/spec/rules/0/algorithm_config/release'

const dir = mkdtempSync(join(tmpdir(), 'fv-cc-lease-'))
const file = join(dir, 'bundle.json')
const rule = (name: string, config: object): object => ({
  name,
  limit_keys: ['header:x-tenant'],
  algorithm: 'concurrency',
  algorithm_config: config,
})
writeFileSync(
  file,
  JSON.stringify({
    bundle_version: 1,
    policies: [
      { id: 'exchange', spec: { selector: { pathPrefix: '/exchange/' }, rules: [rule('per_exchange', { max_concurrent: 1 })] } },
      {
        id: 'lease',
        spec: {
          selector: { pathPrefix: '/lease/' },
          rules: [rule('per_lease', { max_concurrent: 2, lease_seconds: LEASE_S, release: 'lease' })],
        },
      },
    ],
  }),
)

/** The backend holds a request until `free()` (x-hold) or answers at once. */
const holding: (() => void)[] = []
let backend: Backend
before(async () => {
  backend = await startBackend((req, res) => {
    if (req.headers['x-hold'] === undefined) return void res.end('ok')
    holding.push(() => res.end('ok'))
  })
})
after(async () => {
  await backend?.close()
  rmSync(dir, { recursive: true, force: true })
})

const listening = (l: LogLine): boolean => typeof l.msg === 'string' && l.msg.startsWith('fairvisor listening')
const refusesRelease = (l: LogLine): boolean => typeof l.msg === 'string' && l.msg.includes(`: ${RELEASE_POINTER}: `)

async function decide(gw: GatewayProcess, path: string): Promise<{ status: number; reason: string | null; limit: string | null }> {
  const r = await fetch(`${gw.url}/v1/decision`, {
    method: 'POST',
    headers: { 'x-original-uri': path, 'x-original-method': 'GET', 'x-tenant': 'acme' },
  })
  await r.arrayBuffer()
  return { status: r.status, reason: r.headers.get('x-fairvisor-reason'), limit: r.headers.get('ratelimit-limit') }
}

it('decision service with ext_authz: a slot given back at the exchange’s end is refused; "release": "lease" holds each slot for its lease', async () => {
  const gw = await startGateway({ FAIRVISOR_MODE: 'decision_service', FAIRVISOR_CONFIG_FILE: file, FAIRVISOR_GRPC_PORT: '0' })
  const line = await gw.waitForLog(listening)
  const grpc = grpcClients(line.grpcPort as number)
  try {
    const refused = await gw.waitForLog(refusesRelease)
    assert.match(String(refused.msg), /the decision service \(\/v1\/decision\) does not see a request end.*set "release": "lease"/)
    const unlimited = await Promise.all([1, 2, 3].map(() => decide(gw, '/exchange/x')))
    assert.deepEqual(
      unlimited.map((d) => d.status),
      [200, 200, 200],
      'the dropped rule limits nothing',
    )

    const t0 = performance.now()
    assert.equal((await decide(gw, '/lease/x')).status, 200)
    const check = await grpc.check(checkRequest({ path: '/lease/x', headers: { 'x-tenant': 'acme' } }))
    assert.equal(check.status.code ?? 0, 0, 'ext_authz takes the second slot of the same counter')
    const t1 = performance.now()
    assert.deepEqual(await decide(gw, '/lease/x'), { status: 429, reason: 'concurrency_exceeded', limit: '2' })
    const denied = await grpc.check(checkRequest({ path: '/lease/x', headers: { 'x-tenant': 'acme' } }))
    assert.equal(denied.status.code, 7, 'ext_authz refused too (PERMISSION_DENIED)')

    // Each passing probe takes a slot for its own lease: two passes, the two slots taken above free again
    // (taken a moment apart, they may fall in lease buckets a third of the lease apart).
    let passes = 0
    let firstPassMs = 0
    let lastRefusedMs = 0
    await waitFor(
      async () => {
        const began = performance.now()
        const d = await decide(gw, '/lease/x')
        if (d.status !== 200) lastRefusedMs = began - t1
        else if (++passes === 1) firstPassMs = performance.now() - t0
        return passes === 2
      },
      'both slots free again',
      15_000,
      25,
    )
    console.log(
      `lease ${LEASE_S} s: a slot free again after ${firstPassMs.toFixed(0)} ms, last refused probe ${lastRefusedMs.toFixed(0)} ms`,
    )
    assert.ok(firstPassMs >= ((2 / 3) * LEASE_S - SLACK_S) * 1000, `held at least two thirds of the lease: ${firstPassMs} ms`)
    assert.ok(lastRefusedMs <= (LEASE_S + SLACK_S) * 1000, `free within the lease: a probe begun ${lastRefusedMs} ms after was refused`)
  } finally {
    grpc.close()
    await gw.stop()
  }
})

it('reverse proxy: the same rule is refused beside a gRPC listener, and limits in flight without one', async () => {
  const env = { FAIRVISOR_BACKEND_URL: backend.url, FAIRVISOR_CONFIG_FILE: file }
  const withGrpc = await startGateway({ ...env, FAIRVISOR_GRPC_PORT: '0' })
  try {
    const refused = await withGrpc.waitForLog(refusesRelease)
    assert.match(String(refused.msg), /gRPC \(ext_authz, the Rate Limit Service; FAIRVISOR_GRPC_PORT\) does not see a request end/)
  } finally {
    await withGrpc.stop()
  }

  const proxy = await startGateway(env)
  try {
    await proxy.waitForLog((l) => l.msg === 'bundle applied')
    assert.equal(proxy.logs.find(refusesRelease), undefined, 'nothing refused')
    const first = fetch(`${proxy.url}/exchange/x`, { headers: { 'x-tenant': 'acme', 'x-hold': '1' } })
    await waitFor(() => holding.length === 1, 'the first request held at the backend')
    const second = await fetch(`${proxy.url}/exchange/x`, { headers: { 'x-tenant': 'acme' } })
    await second.arrayBuffer()
    assert.deepEqual([second.status, second.headers.get('x-fairvisor-reason')], [429, 'concurrency_exceeded'])
    holding.shift()!()
    assert.equal((await (await first).text()).length > 0, true)
  } finally {
    await proxy.stop()
  }
})
