/**
 * envoyproxy/ratelimit's statistics from the real gateway: a sequence of
 * ShouldRateLimit calls over gRPC (each on its own connection, so that with
 * worker threads both workers serve some) on the in-process store, on it
 * with two worker threads and on Redis; then /metrics shows upstream's
 * Prometheus names and labels with the sequence's counts (summed over the
 * threads), and a statsd listener (node:dgram) has received upstream's
 * counters as datagrams adding up to the same. A hot reload of a bad then a
 * good file is counted in config_load_error / config_load_success; a Redis
 * outage in redis_error.
 */
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { createSocket, type Socket } from 'node:dgram'
import { once } from 'node:events'
import { mkdirSync, mkdtempSync, renameSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { status as Code } from '@grpc/grpc-js'
import { grpcClients } from '../helpers/grpc-client.js'
import { metricValue, startGateway, type GatewayProcess } from '../helpers/processes.js'
import { deleteKeys, startRedis } from '../helpers/redis-servers.js'
import { waitFor } from '../helpers/wait.js'

const OK = 1
const OVER_LIMIT = 2
const REDIS_URL = process.env.FAIRVISOR_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379'

/** Year windows: a sequence never straddles two. */
const yaml = (domain: string, extra = '') => `domain: ${domain}
descriptors:
  - key: k
    rate_limit: {unit: year, requests_per_unit: 5}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: year, requests_per_unit: 0}
  - key: route
    value_to_metric: true
    descriptors:
      - key: method
        rate_limit: {unit: year, requests_per_unit: 100}
  - key: user
    detailed_metric: true
    rate_limit: {unit: year, requests_per_unit: 100}
${extra}`

/** A UDP statsd server: every `name:value|c` line received, summed by name. */
async function statsdServer(): Promise<{ port: number; sums: Map<string, number>; socket: Socket }> {
  const socket = createSocket('udp4')
  const sums = new Map<string, number>()
  socket.on('message', (m) => {
    for (const line of m.toString().split('\n')) {
      const match = /^(.+):(\d+)\|c$/.exec(line)
      assert.ok(match, `a statsd counter line: ${JSON.stringify(line)}`)
      sums.set(match[1]!, (sums.get(match[1]!) ?? 0) + Number(match[2]))
    }
  })
  socket.bind(0, '127.0.0.1')
  await once(socket, 'listening')
  return { port: socket.address().port, sums, socket }
}

/** One ShouldRateLimit call on a connection of its own. */
async function call(port: number, domain: string, entries: Array<[string, string]>, hits?: number) {
  const c = grpcClients(port)
  try {
    return (await c.shouldRateLimit({
      domain,
      descriptors: [
        { entries: entries.map(([key, value]) => ({ key, value })), ...(hits === undefined ? {} : { hits_addend: { value: hits } }) },
      ],
    })) as { overall_code: number }
  } finally {
    c.close()
  }
}

/** Replaces the configuration file at once (written beside, renamed in): one reload per change. */
function replace(dir: string, text: string): void {
  const tmp = join(dir, 'next.tmp')
  writeFileSync(tmp, text)
  renameSync(tmp, join(dir, 'config.yaml'))
}

async function metrics(gw: GatewayProcess): Promise<string[]> {
  return (await (await fetch(`${gw.url}/metrics`)).text()).split('\n')
}

const VARIANTS: Array<[string, Record<string, string>]> = [
  ['the in-process store', {}],
  ['the in-process store with 2 worker threads', { FAIRVISOR_WORKERS: '2' }],
  ['Redis', { FAIRVISOR_STORE: REDIS_URL, FAIRVISOR_STORE_TIMEOUT_MS: '2000' }],
]

for (const [where, env] of VARIANTS)
  test(`upstream's statistics on /metrics and to statsd, on ${where}`, async () => {
    const domain = `stats_${randomBytes(4).toString('hex')}`
    const dir = mkdtempSync(join(tmpdir(), 'fv-rls-stats-'))
    const config = join(dir, 'config')
    mkdirSync(config)
    writeFileSync(join(config, 'config.yaml'), yaml(domain))
    const statsd = await statsdServer()
    const workers = env.FAIRVISOR_WORKERS === '2'
    const gw = await startGateway(
      {
        FAIRVISOR_MODE: 'decision_service',
        FAIRVISOR_GRPC_PORT: '0',
        FAIRVISOR_RLS_CONFIG: config,
        // envoyproxy/ratelimit's own names for its statsd sink.
        USE_STATSD: 'true',
        STATSD_HOST: '127.0.0.1',
        STATSD_PORT: String(statsd.port),
        STATS_FLUSH_INTERVAL: '100ms',
        ...env,
      },
      { timeoutMs: 60_000 },
    )
    try {
      const line = await gw.waitForLog((l) => typeof l.msg === 'string' && l.msg.startsWith('fairvisor listening'))
      const port = line.grpcPort as number
      // 7 hits on a limit of 5: 5 within (the 5th past 0.8 × 5, near), 2 over.
      const codes: number[] = []
      for (let i = 0; i < 7; i++) codes.push((await call(port, domain, [['k', 'v']])).overall_code)
      assert.deepEqual(codes, [OK, OK, OK, OK, OK, OVER_LIMIT, OVER_LIMIT])
      // hits_addend counts hits: 3 more, all over.
      assert.equal((await call(port, domain, [['k', 'v']], 3)).overall_code, OVER_LIMIT)
      const route: Array<[string, string]> = [
        ['route', 'api'],
        ['method', 'GET'],
      ]
      for (let i = 0; i < 2; i++) await call(port, domain, route)
      await call(port, domain, [['user', 'alice']])
      // shadow_mode on a limit of 0: every hit over, answered OK, and logged (by the worker that served it).
      const served = () => new Set(gw.logs.filter((l) => l.event === 'would_reject').map((l) => l.worker))
      let shadowHits = 0
      while (shadowHits < 3 || (workers && served().size < 2 && shadowHits < 200)) {
        assert.equal((await call(port, domain, [['shadow', `ip${shadowHits}`]])).overall_code, OK)
        shadowHits++
      }
      if (workers) {
        await waitFor(() => served().size === 2, 'would_reject lines of both workers')
        assert.deepEqual([...served()].sort(), [1, 2], 'both workers served calls')
      }
      // A call upstream refuses (an empty domain): a service_error.
      await assert.rejects(call(port, '', [['k', 'v']]), (e: { code: number }) => e.code === Code.INVALID_ARGUMENT)

      const rl = `ratelimit.service.rate_limit.${domain}`
      const expected = new Map([
        [`${rl}.k.total_hits`, 10],
        [`${rl}.k.within_limit`, 5],
        [`${rl}.k.near_limit`, 1],
        [`${rl}.k.over_limit`, 5],
        [`${rl}.route_api.method.total_hits`, 2],
        [`${rl}.route_api.method.within_limit`, 2],
        [`${rl}.user_alice.total_hits`, 1],
        [`${rl}.user_alice.within_limit`, 1],
        [`${rl}.shadow.total_hits`, shadowHits],
        [`${rl}.shadow.over_limit`, shadowHits],
        [`${rl}.shadow.shadow_mode`, shadowHits],
        ['ratelimit.service.config_load_success', 1],
        ['ratelimit.service.call.should_rate_limit.service_error', 1],
      ])
      const sorted = (m: Map<string, number>) => [...m].sort(([a], [b]) => a.localeCompare(b))
      await waitFor(() => JSON.stringify(sorted(statsd.sums)) === JSON.stringify(sorted(expected)), 'the datagrams adding up')
      assert.deepEqual(sorted(statsd.sums), sorted(expected), 'exactly these counters, nothing else')

      // /metrics: the names and labels of upstream's statsd-exporter mapping, summed over the threads.
      const two = (k: string) => `{domain="${domain}",key1="${k}"}`
      const text = await metrics(gw)
      const ours = text.filter((l) => l.startsWith('ratelimit_service_rate_limit_') && l.includes(`domain="${domain}"`)).sort()
      assert.deepEqual(
        ours,
        [
          `ratelimit_service_rate_limit_near_limit${two('k')} 1`,
          `ratelimit_service_rate_limit_over_limit${two('k')} 5`,
          `ratelimit_service_rate_limit_over_limit${two('shadow')} ${shadowHits}`,
          `ratelimit_service_rate_limit_shadow_mode${two('shadow')} ${shadowHits}`,
          `ratelimit_service_rate_limit_total_hits${two('k')} 10`,
          `ratelimit_service_rate_limit_total_hits${two('shadow')} ${shadowHits}`,
          `ratelimit_service_rate_limit_total_hits${two('user_alice')} 1`,
          `ratelimit_service_rate_limit_total_hits{domain="${domain}",key1="route_api",key2="method"} 2`,
          `ratelimit_service_rate_limit_within_limit${two('k')} 5`,
          `ratelimit_service_rate_limit_within_limit${two('user_alice')} 1`,
          `ratelimit_service_rate_limit_within_limit{domain="${domain}",key1="route_api",key2="method"} 2`,
        ].sort(),
      )
      assert.equal(await metricValue(gw, 'ratelimit_service_config_load_success'), 1)
      assert.equal(await metricValue(gw, 'ratelimit_service_config_load_error'), 0)
      assert.equal(await metricValue(gw, 'ratelimit_service_should_rate_limit_error', '{err_type="service_error"}'), 1)

      // A hot reload of a bad file (kept out, counted an error), then of a good one.
      const loads = (msg: string) => gw.logs.filter((l) => typeof l.msg === 'string' && l.msg.startsWith(msg)).length
      replace(config, yaml(domain, '  - key: typo\n    ratelimit: {unit: year, requests_per_unit: 1}\n'))
      await waitFor(() => loads('rls config rejected') >= 1, 'the bad file refused')
      replace(config, yaml(domain, '  - key: added\n    rate_limit: {unit: year, requests_per_unit: 1}\n'))
      await waitFor(() => loads('rls config loaded') >= 2, 'the good file loaded')
      // Every load the log shows is counted, on /metrics and to statsd alike.
      const [loaded, rejected] = [loads('rls config loaded'), loads('rls config rejected')]
      assert.equal(await metricValue(gw, 'ratelimit_service_config_load_success'), loaded)
      assert.equal(await metricValue(gw, 'ratelimit_service_config_load_error'), rejected)
      await waitFor(
        () =>
          statsd.sums.get('ratelimit.service.config_load_success') === loaded &&
          statsd.sums.get('ratelimit.service.config_load_error') === rejected,
        'the loads sent to statsd',
      )
    } finally {
      await gw.stop()
      statsd.socket.close()
      if (env.FAIRVISOR_STORE) await deleteKeys(REDIS_URL, `*${domain}*`)
    }
  })

test('a Redis outage: redis_error counted, and the hits in total_hits (as upstream counts them before its store call)', async () => {
  const redis = await startRedis()
  const dir = mkdtempSync(join(tmpdir(), 'fv-rls-stats-'))
  writeFileSync(join(dir, 'config.yaml'), yaml('outage'))
  const gw = await startGateway({
    FAIRVISOR_MODE: 'decision_service',
    FAIRVISOR_GRPC_PORT: '0',
    FAIRVISOR_RLS_CONFIG: dir,
    FAIRVISOR_STORE: redis.url,
    FAIRVISOR_STORE_TIMEOUT_MS: '500',
  })
  try {
    const line = await gw.waitForLog((l) => typeof l.msg === 'string' && l.msg.startsWith('fairvisor listening'))
    const port = line.grpcPort as number
    assert.equal((await call(port, 'outage', [['k', 'v']])).overall_code, OK)
    await redis.kill()
    // Whatever the answer (the fail policy's, or an error), the call counts as upstream's redis_error.
    await call(port, 'outage', [['k', 'v']], 2).catch(() => undefined)
    assert.equal(await metricValue(gw, 'ratelimit_service_should_rate_limit_error', '{err_type="redis_error"}'), 1)
    assert.equal(await metricValue(gw, 'ratelimit_service_rate_limit_total_hits', '{domain="outage",key1="k"}'), 3)
    assert.equal(await metricValue(gw, 'ratelimit_service_rate_limit_within_limit', '{domain="outage",key1="k"}'), 1)
  } finally {
    await gw.stop()
    await redis.stop()
  }
})
