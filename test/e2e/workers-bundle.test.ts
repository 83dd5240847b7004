/**
 * One bundle for every worker thread (FAIRVISOR_WORKERS=2): the supervisor
 * alone reads the bundle and the RLS configuration, and hands each worker
 * what it accepted; workers never read those files.
 * - a worker restarted after a refused reload, or after the file was
 *   replaced by an older or broken bundle, runs the supervisor's bundle;
 * - the RLS configuration is loaded by the supervisor only, and a change
 *   reaches every worker.
 */
import assert from 'node:assert/strict'
import { writeFileSync } from 'node:fs'
import { after, before, describe, it } from 'node:test'
import type { Supervisor } from '../../src/workers/supervisor.js'
import { perIpBundle } from '../helpers/bundles.js'
import { grpcClients } from '../helpers/grpc-client.js'
import { startBackend, startGateway, type Backend, type GatewayProcess, type LogLine } from '../helpers/processes.js'
import { waitFor } from '../helpers/wait.js'
import { ask, bundleFile, readyz, removeBundleFiles, V1, V2 } from '../helpers/worker-bundles.js'
import { startBuiltSupervisor } from '../helpers/supervisor.js'

let backend: Backend
before(async () => {
  backend = await startBackend()
})
after(async () => {
  await backend.close()
  removeBundleFiles()
})

describe('a restarted worker runs the supervisor bundle, whatever the file holds now', () => {
  let sup: Supervisor
  let file: string
  const url = (): string => `http://127.0.0.1:${sup.port}`
  before(async () => {
    file = bundleFile(V1)
    sup = await startBuiltSupervisor({ FAIRVISOR_BACKEND_URL: backend.url, FAIRVISOR_CONFIG_FILE: file })
  })
  after(async () => {
    await sup?.stop('test done')
  })

  const reloads = async (result: string): Promise<number> => {
    const text = await (await fetch(`${url()}/metrics`)).text()
    return Number(new RegExp(`^fairvisor_config_reload_total\\{result="${result}"\\} (\\d+)$`, 'm').exec(text)?.[1])
  }
  /** Write `text`, and wait until the supervisor has judged it (`result` counted once more). */
  async function replace(text: string, result: string): Promise<void> {
    const before = await reloads(result)
    writeFileSync(file, text)
    await waitFor(async () => (await reloads(result)) === before + 1, `the reload counted ${result}`, 15_000, 50)
  }
  /** 24 requests at once on new connections (the kernel spreads them over both workers): every limit they met. */
  async function limits(): Promise<Set<string | number>> {
    const answers = await Promise.all(Array.from({ length: 24 }, () => ask(sup.port, '/x')))
    return new Set(answers.map((a) => a.limit ?? a.status))
  }
  /** Each worker in turn ended as a crash would and replaced: then every request meets `limit`, /readyz says `version`. */
  async function restartEach(limit: string, version: number): Promise<void> {
    for (const id of [1, 2]) {
      await sup.kill(id)
      assert.deepEqual(await limits(), new Set([limit]), `after worker ${id} restarted`)
    }
    assert.deepEqual(await readyz(sup.port), { status: 200, version })
  }

  it('v2 applied in every worker', async () => {
    assert.deepEqual(await limits(), new Set(['1000']))
    await replace(V2, 'applied')
    assert.deepEqual(await limits(), new Set(['2000']))
  })

  it('after a refused reload (a broken policy beside a good one), restarted workers run v2, not the refused bundle', async () => {
    const good = JSON.parse(perIpBundle(3, 3000)) as { policies: unknown[] }
    const broken = {
      id: 'broken',
      spec: {
        selector: { pathPrefix: '/b' },
        rules: [
          { name: 'bad', limit_keys: ['ip:address'], algorithm: 'token_bucket', algorithm_config: { tokens_per_second: 'x', burst: 1 } },
        ],
      },
    }
    await replace(JSON.stringify({ ...good, policies: [...good.policies, broken] }), 'invalid')
    await restartEach('2000', 2)
  })

  it('after the file was replaced by an older bundle, restarted workers run v2', async () => {
    await replace(V1, 'not_monotonic')
    await restartEach('2000', 2)
  })

  it('after the file was replaced by a broken one, restarted workers run v2', async () => {
    await replace('{"bundle_version": 9, "policies": [', 'invalid')
    await restartEach('2000', 2)
  })
})

describe('the RLS configuration with 2 workers', () => {
  const config = (perHour: number): string =>
    `domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: ${perHour}}\n`
  let gw: GatewayProcess
  let file: string
  let grpcPort: number
  before(async () => {
    file = bundleFile(config(1000), 'config.yaml')
    gw = await startGateway(
      { FAIRVISOR_MODE: 'decision_service', FAIRVISOR_GRPC_PORT: '0', FAIRVISOR_RLS_CONFIG: file, FAIRVISOR_WORKERS: '2' },
      { timeoutMs: 30_000 },
    )
    grpcPort = (await gw.waitForLog((l) => String(l.msg).startsWith('fairvisor listening'))).grpcPort as number
  })
  after(async () => {
    assert.equal(await gw.stop(), 0)
  })

  /** The limit 16 calls met, each on a new connection (so over both workers). */
  async function limits(): Promise<Set<number>> {
    const out = new Set<number>()
    for (let i = 0; i < 16; i++) {
      const c = grpcClients(grpcPort)
      try {
        const r = await c.shouldRateLimit({ domain: 'd', descriptors: [{ entries: [{ key: 'k', value: 'v' }] }] })
        out.add(r.statuses[0].current_limit?.requests_per_unit)
      } finally {
        c.close()
      }
    }
    return out
  }

  it('is read by the supervisor only, and a change reaches every worker', async () => {
    const loaded = (): LogLine[] => gw.logs.filter((l) => l.msg === 'rls config loaded')
    assert.deepEqual(
      loaded().map((l) => l.worker),
      [0],
    )
    assert.deepEqual(await limits(), new Set([1000]))
    writeFileSync(file, config(2000))
    await waitFor(() => loaded().length === 2, 'the new configuration loaded')
    assert.deepEqual(
      loaded().map((l) => l.worker),
      [0, 0],
    )
    // The supervisor logs the load, then posts the configuration: a worker applies it a message later.
    let seen = new Set<number>()
    await waitFor(async () => {
      seen = await limits()
      return seen.size === 1 && seen.has(2000)
    }, 'every worker answering on the new configuration')
    assert.deepEqual(seen, new Set([2000]))
  })
})
