/**
 * Kill switches, global_shadow and kill_switch_override (docs/behaviour.md §2, §4 step 2)
 * through the real gateway in decision_service mode, including the overrides
 * switching themselves off at their expires_at without a reload.
 */
import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { startGateway, type GatewayProcess } from '../helpers/processes.js'

function writeBundle(doc: object): string {
  const file = join(mkdtempSync(join(tmpdir(), 'fv-overrides-')), 'bundle.json')
  writeFileSync(file, JSON.stringify(doc))
  return file
}

/** `YYYY-MM-DDTHH:MM:SSZ`, the only timestamp form bundles accept. */
function stamp(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z')
}

function jwt(claims: object): string {
  const b64 = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url')
  return `${b64({ alg: 'none', typ: 'JWT' })}.${b64(claims)}.c2ln`
}

/** docs/behaviour.md §7, written out here independently of src/engine/jitter.ts. */
function expectedRetryAfter(
  base: number,
  policyId: string,
  ruleName: string,
  reason: string,
  sub: string,
  ip: string,
  path: string,
): number {
  const identity = createHash('sha1').update(`fairvisor-retry-jitter|${sub}|${ip}|${path}`).digest('hex').slice(0, 8)
  const seed = Buffer.from(`retry_jitter:v1|${policyId}|${ruleName}|${reason}||${identity}`)
  let h = 0
  for (const b of seed) h = (h * 131 + b) % 1000003
  return Math.max(1, Math.ceil(base + (h / 1000003) * base * 0.5))
}

const POLICY = {
  id: 'api',
  spec: {
    selector: { pathPrefix: '/' },
    rules: [
      {
        name: 'per_user',
        limit_keys: ['header:x-user'],
        algorithm: 'token_bucket',
        algorithm_config: { tokens_per_second: 0.01, burst: 1 },
      },
    ],
  },
}

function decide(gw: GatewayProcess, uri: string, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${gw.url}/v1/decision`, { method: 'POST', headers: { 'x-original-method': 'GET', 'x-original-uri': uri, ...headers } })
}

async function gauge(gw: GatewayProcess, name: string): Promise<number> {
  const text = await (await fetch(`${gw.url}/metrics`)).text()
  const line = text.split('\n').find((l) => l.startsWith(`${name} `))
  assert.ok(line, `${name} not in /metrics`)
  return Number(line.split(' ')[1])
}

describe('kill switches and overrides', () => {
  const gateways: GatewayProcess[] = []
  after(() => Promise.all(gateways.map((g) => g.stop())))

  /**
   * A gateway on `build(expiresMs)`, expires_at a few whole seconds ahead (the bundle format has no
   * fractions). A loaded machine may take longer than that to start or reload: a bundle applied
   * with less than `marginMs` of its window left, or refused because its expires_at had passed
   * by then, is written again (a newer version, twice the window). Each wait is on the gateway's
   * own log: "bundle applied" for that version, or a line saying a bundle was refused.
   */
  async function startWithWindow(build: (expiresMs: number) => object, marginMs: number): Promise<{ gw: GatewayProcess; expires: number }> {
    const file = writeBundle({})
    let version = 1
    let windowS = 3
    const write = (): number => {
      const expires = (Math.floor(Date.now() / 1000) + windowS) * 1000
      writeFileSync(file, JSON.stringify({ ...build(expires), bundle_version: version }))
      return expires
    }
    let expires = write()
    let from = 0
    const gw = await startGateway({ FAIRVISOR_MODE: 'decision_service', FAIRVISOR_CONFIG_FILE: file })
    gateways.push(gw)
    for (;;) {
      const v = version
      const since = from
      const line = await gw.waitForLog(
        (l) => (l.msg === 'bundle applied' && l.version === v) || (l.result === 'invalid' && gw.logs.indexOf(l) >= since),
        20_000,
      )
      if (line.msg === 'bundle applied' && Date.now() < expires - marginMs) return { gw, expires }
      version++
      windowS *= 2
      from = gw.logs.length
      expires = write()
    }
  }

  test('a kill switch on header:x-kill rejects with the docs/behaviour.md §7 Retry-After (base 3600) per subject, never shadowed', async () => {
    const gw = await startGateway({
      FAIRVISOR_MODE: 'decision_service',
      FAIRVISOR_CONFIG_FILE: writeBundle({
        bundle_version: 1,
        policies: [POLICY],
        kill_switches: [{ scope_key: 'header:x-kill', scope_value: 'on', reason: 'incident 42' }],
        // Every policy is shadow for the next hour; the kill switch must still reject.
        global_shadow: { enabled: true, reason: 'rollout', expires_at: stamp(Date.now() + 3600_000) },
      }),
    })
    gateways.push(gw)
    const seen = new Set<number>()
    for (const sub of ['user-1', 'user-2', 'user-3', 'user-4']) {
      const r = await decide(gw, '/orders/7?x=1', { 'x-kill': 'on', authorization: `Bearer ${jwt({ sub })}`, 'x-user': sub })
      assert.equal(r.status, 429, sub)
      assert.equal(r.headers.get('x-fairvisor-reason'), 'kill_switch')
      const retry = Number(r.headers.get('retry-after'))
      // Kill switch seed: empty policy id and rule name (docs/policies.md, "Choices of ours"); the client is the socket peer.
      // The path of the identity is X-Original-URI with its query, as Fairvisor Edge takes it.
      assert.equal(retry, expectedRetryAfter(3600, '', '', 'kill_switch', sub, '127.0.0.1', '/orders/7?x=1'), sub)
      assert.ok(retry >= 3600 && retry <= 5400)
      // The same subject always gets the same value.
      const again = await decide(gw, '/orders/7?x=1', { 'x-kill': 'on', authorization: `Bearer ${jwt({ sub })}` })
      assert.equal(Number(again.headers.get('retry-after')), retry)
      seen.add(retry)
    }
    assert.ok(seen.size >= 2, `values spread across subjects: ${[...seen].join(', ')}`)
    // Exact, case-sensitive match; without the header the (shadowed) policy never rejects.
    assert.equal((await decide(gw, '/orders/7', { 'x-kill': 'ON', 'x-user': 'u' })).status, 200)
    for (let i = 0; i < 3; i++) assert.equal((await decide(gw, '/orders/7', { 'x-user': 'shadowed' })).status, 200)
    assert.equal(await gauge(gw, 'fairvisor_kill_switch_active'), 1)
    assert.equal(await gauge(gw, 'fairvisor_global_shadow_active'), 1)
  })

  test('a kill switch limited to a route, and one that has expired, do not fire elsewhere', async () => {
    const { gw, expires } = await startWithWindow(
      (at) => ({
        policies: [POLICY],
        kill_switches: [
          { scope_key: 'header:x-kill', scope_value: 'route', route: '/admin' },
          { scope_key: 'query:tenant', scope_value: 'acme', expires_at: stamp(at) },
        ],
      }),
      1000,
    )
    assert.equal((await decide(gw, '/x?tenant=acme')).status, 429)
    assert.equal(await gauge(gw, 'fairvisor_kill_switch_active'), 2)
    assert.equal((await decide(gw, '/admin?a=1', { 'x-kill': 'route' })).status, 429)
    assert.equal((await decide(gw, '/admin/x', { 'x-kill': 'route' })).status, 200)
    await sleep(Math.max(0, expires - Date.now()) + 200)
    assert.equal((await decide(gw, '/x?tenant=acme')).status, 200, 'expired kill switch no longer fires')
    assert.equal(await gauge(gw, 'fairvisor_kill_switch_active'), 1)
  })

  test('global_shadow and kill_switch_override hold until expires_at, then enforcement returns without a reload', async () => {
    const { gw, expires: until } = await startWithWindow(
      (at) => ({
        policies: [POLICY],
        kill_switches: [{ scope_key: 'header:x-kill', scope_value: 'on' }],
        global_shadow: { enabled: true, reason: 'dry run of the new limits', expires_at: stamp(at) },
        kill_switch_override: { enabled: true, reason: 'false positive in the kill list', expires_at: stamp(at) },
      }),
      1500,
    )
    const reloads = gw.logs.filter((l) => l.msg === 'bundle applied').length
    for (let i = 0; i < 4; i++) {
      const r = await decide(gw, '/a', { 'x-user': 'before' })
      assert.equal(r.status, 200, 'every policy is shadow')
      assert.equal(r.headers.get('retry-after'), null)
    }
    assert.equal((await decide(gw, '/a', { 'x-kill': 'on', 'x-user': 'k' })).status, 200, 'kill switches are overridden')
    assert.equal(await gauge(gw, 'fairvisor_global_shadow_active'), 1)
    assert.equal(await gauge(gw, 'fairvisor_kill_switch_override_active'), 1)
    assert.equal(await gauge(gw, 'fairvisor_shadow_mode_active'), 1)

    await sleep(until - Date.now() + 200)
    assert.equal((await decide(gw, '/a', { 'x-user': 'after' })).status, 200)
    const r = await decide(gw, '/a', { 'x-user': 'after' })
    assert.equal(r.status, 429, 'enforcing again after global_shadow expired')
    assert.equal(r.headers.get('x-fairvisor-reason'), 'token_bucket_exceeded')
    const k = await decide(gw, '/a', { 'x-kill': 'on', 'x-user': 'k2' })
    assert.equal(k.status, 429)
    assert.equal(k.headers.get('x-fairvisor-reason'), 'kill_switch')
    assert.equal(await gauge(gw, 'fairvisor_global_shadow_active'), 0)
    assert.equal(await gauge(gw, 'fairvisor_kill_switch_override_active'), 0)
    assert.equal(await gauge(gw, 'fairvisor_shadow_mode_active'), 0)
    assert.equal(gw.logs.filter((l) => l.msg === 'bundle applied').length, reloads, 'no reload happened')
  })
})
