// Several worker threads on one port over the shared counter table: exact limits under load, a worker killed mid-load,
// and the GeoIP database read once by the supervisor and handed to every worker, again when it changes.
import assert from 'node:assert/strict'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { spawnSync } from 'node:child_process'
import { Agent, request } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import type { Supervisor } from '../../src/workers/supervisor.js'
import { replaceAtomically, tempFile } from '../helpers/data-files.js'
import { countryRecord, writeMmdb } from '../helpers/mmdb.js'
import { CLI, ROOT, startBackend, startGateway, type Backend, type GatewayProcess } from '../helpers/processes.js'
import { startBuiltSupervisor } from '../helpers/supervisor.js'

const BURST = 300
const BUDGET = 200

function writeBundle(dir: string): string {
  const file = join(dir, 'bundle.json')
  const rule = (name: string, algorithm: string, algorithm_config: object): object => ({
    name,
    limit_keys: ['header:x-user'],
    algorithm,
    algorithm_config,
  })
  writeFileSync(
    file,
    JSON.stringify({
      bundle_version: 1,
      policies: [
        {
          id: 'tb',
          spec: { selector: { pathPrefix: '/tb' }, rules: [rule('bucket', 'token_bucket', { burst: BURST, tokens_per_second: 0.0001 })] },
        },
        {
          id: 'cb',
          spec: {
            selector: { pathPrefix: '/cb' },
            rules: [
              rule('budget', 'cost_based', {
                budget: BUDGET,
                period: '7d',
                staged_actions: [
                  { threshold_percent: 50, action: 'warn' },
                  { threshold_percent: 100, action: 'reject' },
                ],
              }),
            ],
          },
        },
      ],
    }),
  )
  return file
}

/** `clients` concurrent keep-alive clients sending `each` decision requests for `path` as `user`; counts statuses (0: the connection failed). */
async function load(port: number, path: string, user: string, clients: number, each: number): Promise<Map<number, number>> {
  const agent = new Agent({ keepAlive: true, maxSockets: clients })
  const counts = new Map<number, number>()
  const one = (): Promise<number> =>
    new Promise((done) => {
      const req = request(
        {
          host: '127.0.0.1',
          port,
          path: '/v1/decision',
          method: 'POST',
          agent,
          headers: { 'x-original-uri': path, 'x-original-method': 'GET', 'x-user': user },
        },
        (res) => {
          res.resume()
          res.on('end', () => done(res.statusCode!))
        },
      )
      req.on('error', () => done(0))
      req.end()
    })
  await Promise.all(
    Array.from({ length: clients }, async () => {
      for (let i = 0; i < each; i++) {
        const s = await one()
        counts.set(s, (counts.get(s) ?? 0) + 1)
      }
    }),
  )
  agent.destroy()
  return counts
}

describe('FAIRVISOR_WORKERS=2', () => {
  let gw: GatewayProcess
  let dir: string
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'fv-workers-'))
    gw = await startGateway(
      { FAIRVISOR_MODE: 'decision_service', FAIRVISOR_CONFIG_FILE: writeBundle(dir), FAIRVISOR_WORKERS: '2', FAIRVISOR_ACCESS_LOG: 'true' },
      { timeoutMs: 30000 },
    )
  })
  after(async () => {
    assert.equal(await gw.stop(), 0)
  })

  it('64 clients on one key across 2 workers: exactly burst allowed by the token bucket and exactly budget by cost_based, 0 % over-grant', async () => {
    const tb = await load(gw.port, '/tb/x', 'alice', 64, 10)
    const cb = await load(gw.port, '/cb/x', 'alice', 64, 8)
    assert.deepEqual([...tb.entries()].sort(), [
      [200, BURST],
      [429, 640 - BURST],
    ])
    assert.deepEqual([...cb.entries()].sort(), [
      [200, BUDGET],
      [429, 512 - BUDGET],
    ])
    // Both workers served (each access-log line names its worker).
    const served = new Set(gw.logs.filter((l) => l.msg === 'access').map((l) => l.worker))
    assert.deepEqual([...served].sort(), [1, 2])
  })

  it('/metrics is one view summed over the workers', async () => {
    const text = await (await fetch(`${gw.url}/metrics`)).text()
    const value = (action: string, policy: string): number =>
      Number(
        new RegExp(`^fairvisor_decisions_total\\{action="${action}",reason="[^"]*",policy="${policy}"\\} (\\d+)$`, 'm').exec(text)?.[1],
      )
    assert.equal(value('allow', 'tb'), BURST)
    assert.equal(value('allow', 'cb'), BUDGET)
    assert.match(text, /^fairvisor_config_info\{version="1",hash="[^"]+"\} 1$/m)
  })

  it('a reload is reported once every worker runs the new version: right after it, no worker decides with the old one', async () => {
    writeFileSync(
      join(dir, 'bundle.json'),
      JSON.stringify({
        bundle_version: 2,
        policies: [
          {
            id: 'tb',
            spec: {
              selector: { pathPrefix: '/tb' },
              rules: [
                {
                  name: 'bucket_v2',
                  limit_keys: ['header:x-user'],
                  algorithm: 'token_bucket',
                  algorithm_config: { burst: 5, tokens_per_second: 0.0001 },
                },
              ],
            },
          },
        ],
      }),
    )
    gw.proc.kill('SIGHUP')
    await gw.waitForLog((l) => l.msg === 'bundle applied' && l.version === 2, 15000)
    // 64 fresh connections spread over both workers: version 1 would allow up to 300 for a new user.
    const r = await load(gw.port, '/tb/x', 'dave', 64, 2)
    assert.deepEqual([...r.entries()].sort(), [
      [200, 5],
      [429, 123],
    ])
  })
})

describe('a worker killed mid-load', () => {
  let sup: Supervisor
  before(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fv-workers-kill-'))
    sup = await startBuiltSupervisor({ FAIRVISOR_MODE: 'decision_service', FAIRVISOR_CONFIG_FILE: writeBundle(dir) })
  })
  after(async () => {
    await sup.stop('test done')
  })

  it('loses no other state: the shared table survives, the other worker serves on, the replacement joins', async () => {
    // Charge bob 100 of his 300 before the kill.
    const before = await load(sup.port, '/tb/x', 'bob', 10, 10)
    assert.equal(before.get(200), 100)
    const during = load(sup.port, '/tb/x', 'carol', 64, 8)
    await sup.kill(1)
    const carol = await during
    // Requests in flight on the killed worker fail; none of the others is over-granted.
    assert.ok((carol.get(200) ?? 0) <= BURST && (carol.get(200) ?? 0) > 0, JSON.stringify([...carol]))
    // bob's counter is intact: 200 left, whichever worker answers.
    const rest = await load(sup.port, '/tb/x', 'bob', 16, 20)
    assert.deepEqual([...rest.entries()].sort(), [
      [200, 200],
      [429, 120],
    ])
  })
})

/** `n` requests at once, each on a new connection (so the kernel spreads them over the workers); counts statuses. */
async function spread(port: number, path: string, headers: Record<string, string>, n: number): Promise<Map<number, number>> {
  const codes = await Promise.all(
    Array.from(
      { length: n },
      () =>
        new Promise<number>((done) => {
          const req = request({ host: '127.0.0.1', port, path, agent: false, headers }, (res) => {
            res.resume()
            res.on('end', () => done(res.statusCode!))
          })
          req.on('error', () => done(0))
          req.end()
        }),
    ),
  )
  const counts = new Map<number, number>()
  for (const c of codes) counts.set(c, (counts.get(c) ?? 0) + 1)
  return counts
}

describe('ip:country with 2 workers', () => {
  let gw: GatewayProcess
  let backend: Backend
  const db = (iso: string): Buffer => writeMmdb([{ network: '203.0.113.0/24', record: countryRecord(iso) }])
  const country = tempFile('workers-country.mmdb', db('DE'))
  before(async () => {
    backend = await startBackend()
    const dir = mkdtempSync(join(tmpdir(), 'fv-workers-geo-'))
    const bundle = join(dir, 'bundle.json')
    const rule = { name: 'per_country', limit_keys: ['ip:country'], algorithm: 'token_bucket' }
    const config = { burst: 100, tokens_per_second: 0.0001 }
    const policy = { id: 'geo', spec: { selector: { pathPrefix: '/geo' }, rules: [{ ...rule, algorithm_config: config }] } }
    writeFileSync(bundle, JSON.stringify({ bundle_version: 1, policies: [policy] }))
    gw = await startGateway(
      {
        FAIRVISOR_BACKEND_URL: backend.url,
        FAIRVISOR_CONFIG_FILE: bundle,
        FAIRVISOR_TRUSTED_PROXIES: '127.0.0.1',
        FAIRVISOR_GEOIP_COUNTRY_FILE: country,
        FAIRVISOR_WORKERS: '2',
        FAIRVISOR_ACCESS_LOG: 'true',
      },
      { timeoutMs: 30000 },
    )
  })
  after(async () => {
    assert.equal(await gw.stop(), 0)
    await backend.close()
  })

  it('every worker looks the country up; a replaced database is read once and reaches every worker', async () => {
    const xff = { 'x-forwarded-for': '203.0.113.5' }
    const servedSince = (from: number): number[] =>
      [
        ...new Set(
          gw.logs
            .slice(from)
            .filter((l) => l.msg === 'access')
            .map((l) => l.worker as number),
        ),
      ].sort()
    // DE's bucket of 100, shared by both workers: a worker without the country would not apply the rule (all 200).
    let mark = gw.logs.length
    assert.deepEqual([...(await spread(gw.port, '/geo/a', xff, 130)).entries()].sort(), [
      [200, 100],
      [429, 30],
    ])
    // Which worker accepts a connection is the kernel's choice: on a busy machine one may take a whole batch.
    // More requests until both have served; DE is empty, so a worker without the country would answer 200.
    for (let i = 0; i < 50 && servedSince(mark).length < 2; i++)
      assert.deepEqual([...(await spread(gw.port, '/geo/a', xff, 8)).entries()], [[429, 8]])
    assert.deepEqual(servedSince(mark), [1, 2])
    replaceAtomically(country, db('NL'))
    for (const worker of [1, 2])
      await gw.waitForLog(
        (l) => l.msg === 'data file updated' && l.worker === worker && l.setting === 'FAIRVISOR_GEOIP_COUNTRY_FILE',
        15000,
      )
    // NL's bucket is fresh: a worker still on the old database would answer 429 (DE is empty).
    mark = gw.logs.length
    assert.deepEqual([...(await spread(gw.port, '/geo/a', xff, 64)).entries()], [[200, 64]])
    // As above, within NL's 100: a worker still on the old database would answer 429.
    for (let i = 0; i < 9 && servedSince(mark).length < 2; i++)
      assert.deepEqual([...(await spread(gw.port, '/geo/a', xff, 4)).entries()], [[200, 4]])
    assert.deepEqual(servedSince(mark), [1, 2])
    const reads = gw.logs.filter((l) => l.msg === 'data file reloaded')
    assert.deepEqual(
      reads.map((l) => l.worker),
      [0],
      'read and checked once, by the supervisor',
    )
  })

  it('a missing database stops start-up in the supervisor: exit 2 and one line naming the setting', () => {
    const r = spawnSync(process.execPath, [CLI], {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH,
        FAIRVISOR_WORKERS: '2',
        FAIRVISOR_PORT: '0',
        FAIRVISOR_BACKEND_URL: 'http://127.0.0.1:1',
        FAIRVISOR_GEOIP_COUNTRY_FILE: `${country}.absent`,
        FAIRVISOR_LOG_LEVEL: 'silent',
      },
      encoding: 'utf8',
      timeout: 20_000,
    })
    assert.equal(r.status, 2)
    assert.equal(r.stderr.trim(), `fairvisor: invalid setting FAIRVISOR_GEOIP_COUNTRY_FILE: cannot read ${country}.absent (ENOENT)`)
  })
})
