/**
 * A store URL the server refuses (wrong password, ACL user, role or database)
 * stops start-up with exit code 2 and the reason on stderr: waiting would not
 * fix it, and fail-open would otherwise run without limits forever. A store
 * that is only unreachable keeps the start (connecting in the background),
 * /readyz answering 503 under fail-closed and 200 with `store: degraded`
 * under fail-open, where each request let through unchecked is counted in
 * fairvisor_store_fail_open_total.
 */
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { writeHeaderBucketBundle } from '../helpers/bundles.js'
import { freePort, metricValue, startGateway } from '../helpers/processes.js'
import { startRedis, type RedisServer } from '../helpers/redis-servers.js'

/** Never called: these tests only start the gateway and ask /readyz. */
const BACKEND = 'http://127.0.0.1:9'
let dir: string
let bundle: string
before(() => {
  dir = mkdtempSync(join(tmpdir(), 'fv-store-start-'))
  bundle = writeHeaderBucketBundle(dir, 'per_user', { burst: 5, tokens_per_second: 1 })
})
after(() => rmSync(dir, { recursive: true, force: true }))

/** Starting on `store` fails with exit code 2 and a stderr line matching `reason`. */
async function refused(store: string, reason: RegExp): Promise<void> {
  // A gateway that starts anyway is stopped, and the test fails.
  const started = startGateway({ FAIRVISOR_BACKEND_URL: BACKEND, FAIRVISOR_CONFIG_FILE: bundle, FAIRVISOR_STORE: store }).then(
    async (gw) => {
      await gw.stop()
      return gw
    },
  )
  await assert.rejects(started, (e: Error) => {
    assert.match(e.message, /exited with 2 before listening/)
    assert.match(e.message, /invalid setting FAIRVISOR_STORE: the \S+ store refused the connection/)
    assert.match(e.message, reason)
    return true
  })
}

// The cases of each group are independent (each its own gateway and URL): they run at once.
describe('a PostgreSQL store that refuses the URL stops start-up (exit 2)', { concurrency: true }, () => {
  it('an unknown database', () => refused('postgres://postgres@127.0.0.1:5432/fv_no_such_db', /3D000 .*fv_no_such_db/))
  it('an unknown role', () => refused('postgres://fv_no_such_role@127.0.0.1:5432/test', /28000 .*fv_no_such_role/))
})

describe('a Redis store that refuses the URL stops start-up (exit 2)', { concurrency: true }, () => {
  let server: RedisServer
  before(async () => {
    server = await startRedis()
    server.cli('acl', 'setuser', 'gw', 'on', '>gw-secret', '~tb:*', '+@all')
    server.cli('config', 'set', 'requirepass', 'right')
  })
  after(async () => {
    await server?.stop()
  })
  it('no password where one is required (NOAUTH)', () => refused(`redis://127.0.0.1:${server.port}`, /NOAUTH/))
  it('a wrong password', () => refused(`redis://:wrong@127.0.0.1:${server.port}`, /WRONGPASS/))
  it('an ACL user with a wrong password', () => refused(`redis://gw:wrong@127.0.0.1:${server.port}`, /WRONGPASS/))
  it('a database number the server does not have', () => refused(`redis://:right@127.0.0.1:${server.port}/999`, /DB index is out of range/))
})

// Each case waits out the gateway's start-up connect wait (3 s) on its own free port: at once, the four wait it once.
describe('an unreachable store at start-up: the gateway starts and /readyz tells', { concurrency: true }, () => {
  for (const [scheme, url] of [
    ['redis', (p: number) => `redis://127.0.0.1:${p}`],
    ['postgres', (p: number) => `postgres://postgres@127.0.0.1:${p}/test`],
  ] as const) {
    for (const policy of ['closed', 'open'] as const) {
      it(`${scheme}, fail-${policy}: ${policy === 'closed' ? '503 not_ready' : '200 with store degraded, each request counted as fail-open'}`, async () => {
        const gw = await startGateway(
          {
            FAIRVISOR_BACKEND_URL: BACKEND,
            FAIRVISOR_CONFIG_FILE: bundle,
            FAIRVISOR_STORE: url(await freePort()),
            FAIRVISOR_FAIL_POLICY: policy,
          },
          { timeoutMs: 20_000 },
        )
        try {
          await gw.waitForLog((l) => /not reachable at start-up/.test(l.msg))
          const r = await fetch(`${gw.url}/readyz`)
          const body = (await r.json()) as { status: string; store: string }
          if (policy === 'closed') assert.deepEqual([r.status, body.status, body.store], [503, 'not_ready', 'connecting'])
          else assert.deepEqual([r.status, body.status, body.store], [200, 'ready', 'degraded'])
          // A request meanwhile: fail-open lets it through unchecked (then the unreachable backend: 502), counted by store.
          const q = await fetch(`${gw.url}/x`, { headers: { 'x-user': 'u' } })
          await q.text()
          assert.equal(q.status, policy === 'closed' ? 503 : 502)
          assert.equal(await metricValue(gw, 'fairvisor_store_fail_open_total', `store="${scheme}"`), policy === 'closed' ? undefined : 1)
        } finally {
          await gw.stop()
        }
      })
    }
  }
})
