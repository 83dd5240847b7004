/**
 * deploy/compose.yaml, checked without a Docker engine: the build context,
 * the Dockerfile's COPY sources (present, not excluded by .dockerignore), the
 * mounted bundle (valid), env names the settings read and values they
 * accept, service names and ports that line up. Then the scenario it is for,
 * with real processes: two gateways with the compose environment (hosts
 * mapped to 127.0.0.1) on one Redis share the demo bundle's limit.
 */
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { after, describe, test } from 'node:test'
import { parse } from 'yaml'
import { loadSettings } from '../../src/settings.js'
import { CLI, ROOT, startBackend, startGateway, type Backend, type GatewayProcess } from '../helpers/processes.js'
import { settingsRead } from '../helpers/settings-names.js'

interface Service {
  build?: { context: string; dockerfile: string }
  image?: string
  command?: string[]
  environment?: Record<string, string>
  volumes?: string[]
  ports?: string[]
  read_only?: boolean
}

const FILE = join(ROOT, 'deploy/compose.yaml')
const DIR = dirname(FILE)
const compose = parse(readFileSync(FILE, 'utf8'), { merge: true }) as { services: Record<string, Service> }
const gateways = Object.entries(compose.services).filter(([, s]) => s.build)

/** Container path → host path of a service's bind mounts. */
function mounts(s: Service): Map<string, string> {
  return new Map(
    (s.volumes ?? []).map((v) => {
      const [host, container] = v.split(':')
      return [container!, resolve(DIR, host!)]
    }),
  )
}

/** The host file behind a container path, through the service's mounts. */
function hostPath(s: Service, containerPath: string): string {
  for (const [c, h] of mounts(s)) if (containerPath.startsWith(`${c}/`)) return join(h, containerPath.slice(c.length + 1))
  assert.fail(`${containerPath} is not under a mounted directory`)
}

describe('deploy/compose.yaml', () => {
  test('two gateways built from the repository Dockerfile, every COPY source present', () => {
    assert.ok(gateways.length >= 2, 'two gateway replicas')
    const ignored = readFileSync(join(ROOT, '.dockerignore'), 'utf8')
      .split('\n')
      .filter((l) => l && !l.startsWith('#'))
    for (const [name, s] of gateways) {
      const context = resolve(DIR, s.build!.context)
      assert.equal(context, resolve(ROOT), `${name}: the build context is the repository`)
      const dockerfile = readFileSync(join(context, s.build!.dockerfile), 'utf8')
      for (const m of dockerfile.matchAll(/^COPY (?!--from)(.+) \S+$/gm)) {
        for (const src of m[1]!.split(/\s+/)) {
          assert.ok(existsSync(join(context, src)), `Dockerfile copies ${src}, which does not exist`)
          assert.ok(!ignored.includes(src), `.dockerignore excludes ${src}, which the Dockerfile copies`)
        }
      }
      assert.match(dockerfile, /ENTRYPOINT \["node", "dist\/cli\.js"\]/)
      assert.equal(s.read_only, true)
    }
  })

  test("each gateway's environment: settings the code reads and accepts, pointing at the services", () => {
    const known = settingsRead()
    const stores = new Set<string>()
    const hostPorts: string[] = []
    for (const [name, s] of gateways) {
      const env = s.environment!
      for (const k of Object.keys(env)) assert.ok(known.has(k), `${name}: ${k} is not a setting the gateway reads`)
      const settings = loadSettings(env)
      // The backend URL names the backend service on the port it listens on.
      const backend = compose.services[settings.backendUrl!.hostname]
      assert.ok(backend, `${name}: FAIRVISOR_BACKEND_URL names no service`)
      assert.ok(
        backend.command?.includes(`-listen=:${settings.backendUrl!.port}`),
        `${name}: the backend does not listen on ${settings.backendUrl!.port}`,
      )
      const store = new URL(settings.store)
      assert.equal(compose.services[store.hostname]?.image?.startsWith('redis:'), true, `${name}: FAIRVISOR_STORE names the Redis service`)
      stores.add(settings.store)
      // The bundle is mounted and valid.
      const bundle = hostPath(s, settings.configFile!)
      const v = spawnSync(process.execPath, [CLI, 'validate', bundle], { encoding: 'utf8', timeout: 10000 })
      assert.equal(v.status, 0, `${name}: ${bundle} does not validate: ${v.stdout}${v.stderr}`)
      // Published ports reach the listeners the settings give.
      const published = new Map((s.ports ?? []).map((p) => [Number(p.split(':')[1]), p.split(':')[0]!]))
      assert.ok(published.has(settings.port) && published.has(settings.adminPort!), `${name}: ports ${JSON.stringify(s.ports)}`)
      hostPorts.push(...published.values())
    }
    assert.equal(stores.size, 1, 'the gateways share one store')
    assert.equal(new Set(hostPorts).size, hostPorts.length, 'no host port published twice')
  })
})

describe('the compose scenario with real processes: two gateways, one Redis, one limit', () => {
  let backend: Backend
  const running: GatewayProcess[] = []
  after(async () => {
    await Promise.all(running.map((g) => g.stop()))
    await backend?.close()
  })

  test("the demo bundle's 10-request burst holds across both gateways", async () => {
    backend = await startBackend()
    for (const [, s] of gateways) {
      const env = { ...s.environment! }
      env.FAIRVISOR_BACKEND_URL = backend.url
      env.FAIRVISOR_STORE = env.FAIRVISOR_STORE!.replace('//redis:', '//127.0.0.1:')
      env.FAIRVISOR_CONFIG_FILE = hostPath(s, env.FAIRVISOR_CONFIG_FILE!)
      env.FAIRVISOR_PORT = '0'
      env.FAIRVISOR_ADMIN_PORT = '0'
      // A fresh client address per run (Redis keeps the bucket between runs).
      env.FAIRVISOR_TRUSTED_PROXIES = '127.0.0.1'
      // On a loaded test machine a Redis round trip can pass the 50 ms default and
      // fail open (allowed, uncounted); this test is about sharing, not deadlines.
      env.FAIRVISOR_STORE_TIMEOUT_MS = '2000'
      running.push(await startGateway(env))
    }
    const client = `10.${Math.floor(Math.random() * 250)}.${Math.floor(Math.random() * 250)}.${1 + Math.floor(Math.random() * 250)}`
    const statuses: number[] = []
    for (let i = 0; i < 14; i++) {
      const r = await fetch(`${running[i % running.length]!.url}/`, { headers: { 'x-forwarded-for': client } })
      await r.arrayBuffer()
      statuses.push(r.status)
    }
    // burst 10, 0.05 token/s: ten pass, whichever gateway they reach; then both refuse.
    assert.deepEqual(statuses, [...Array(10).fill(200), ...Array(4).fill(429)])
    assert.equal(backend.count, 10)
  })
})
