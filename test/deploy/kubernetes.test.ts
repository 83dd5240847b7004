/**
 * deploy/kubernetes renders with `kubectl kustomize` (each overlay) and the
 * rendered objects agree with the code: the image the Dockerfile builds, the
 * ports the settings give, probes on the admin routes the gateway serves,
 * the bundle ConfigMap mounted as a directory at FAIRVISOR_CONFIG_FILE and
 * accepted by `fairvisor validate`, env names the settings read and values
 * they accept, a non-root read-only container; FAIRVISOR_WORKERS and the CPU
 * and memory limits by the sizing rule of docs/deploy.md, trusted proxies for
 * an Ingress, scrape annotations and the ServiceMonitor on the admin port,
 * spread over nodes, a PodDisruptionBudget that fits every replica count.
 */
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { BlockList } from 'node:net'
import { tmpdir } from 'node:os'
import { join, relative } from 'node:path'
import { describe, test } from 'node:test'
import { parseAllDocuments } from 'yaml'
import { loadSettings } from '../../src/settings.js'
import { CLI, ROOT } from '../helpers/processes.js'
import { settingsRead } from '../helpers/settings-names.js'

type Labels = Record<string, string>

/** The container fields checked below, as the Kubernetes API names them. */
interface Container {
  image: string
  args: string[]
  env: { name: string; value?: string; valueFrom?: { secretKeyRef: { name: string; key: string } } }[]
  ports: { name: string; containerPort: number }[]
  livenessProbe: { httpGet: unknown }
  readinessProbe: { httpGet: unknown }
  startupProbe: { httpGet: unknown }
  volumeMounts: { name: string; mountPath: string; subPath?: string; readOnly?: boolean }[]
  securityContext: { readOnlyRootFilesystem?: boolean }
  resources: { requests: { cpu?: string; memory?: string }; limits: { cpu?: string; memory?: string } }
}

interface SpreadConstraint {
  maxSkew: number
  topologyKey: string
  whenUnsatisfiable: string
  labelSelector: { matchLabels: Labels }
}

/**
 * The spec fields checked below, of whichever kind has them (Deployment,
 * Service, PodDisruptionBudget, HorizontalPodAutoscaler). Typed, not proven:
 * the rendered YAML is whatever kustomize wrote, and the checks assert it.
 */
interface Spec {
  replicas: number
  template: {
    metadata: { labels: Labels; annotations?: Record<string, string> }
    spec: {
      topologySpreadConstraints?: SpreadConstraint[]
      containers: Container[]
      volumes: { name: string; configMap?: { name: string } }[]
      securityContext: { runAsNonRoot: boolean; runAsUser: number }
      terminationGracePeriodSeconds: number
    }
  }
  /** A Service selects by labels; a PodDisruptionBudget by matchLabels. */
  selector: Labels & { matchLabels: Labels }
  ports: { port: number; targetPort: string }[]
  minAvailable?: number | string
  maxUnavailable?: number | string
  scaleTargetRef: unknown
  minReplicas: number
  maxReplicas: number
  /** A ServiceMonitor's scrape endpoints. */
  endpoints: { port: string; path: string }[]
}

interface K8sObject {
  apiVersion: string
  kind: string
  metadata: { name: string; labels?: Labels }
  spec: Spec
  data?: Record<string, string>
}

const DIR = join(ROOT, 'deploy/kubernetes')
const kubectl = spawnSync('kubectl', ['version', '--client'], { encoding: 'utf8' })
const skip = kubectl.error ? 'kubectl is not installed (Debian: apt-get install kubernetes-client; .ci/run does it)' : false

/** A kustomization: its directory relative to deploy/kubernetes, or absolute. */
function render(dir: string): K8sObject[] {
  const path = dir.startsWith('/') ? dir : join(DIR, dir)
  const r = spawnSync('kubectl', ['kustomize', path], { encoding: 'utf8', timeout: 60000 })
  assert.equal(r.status, 0, `kubectl kustomize ${dir} failed: ${r.stderr}`)
  return parseAllDocuments(r.stdout)
    .map((d) => d.toJS() as K8sObject)
    .filter(Boolean)
}

function find(objs: K8sObject[], kind: string, name: string): K8sObject {
  const o = objs.find((x) => x.kind === kind && x.metadata.name === name)
  assert.ok(o, `no ${kind} ${name} among ${objs.map((x) => `${x.kind}/${x.metadata.name}`).join(', ')}`)
  return o
}

/** The container's environment with Secret references resolved from the rendered Secrets. */
function environment(objs: K8sObject[], container: Container): Record<string, string> {
  const env: Record<string, string> = {}
  for (const e of container.env) {
    if (e.value !== undefined) env[e.name] = e.value
    else {
      const ref = e.valueFrom!.secretKeyRef
      const secret = find(objs, 'Secret', ref.name)
      assert.ok(secret.data?.[ref.key], `Secret ${ref.name} has no key ${ref.key}`)
      env[e.name] = Buffer.from(secret.data[ref.key]!, 'base64').toString('utf8')
    }
  }
  return env
}

const ADMIN_ROUTES = readFileSync(join(ROOT, 'src/http/admin.ts'), 'utf8')
const DOCKERFILE = readFileSync(join(ROOT, 'Dockerfile'), 'utf8')
const DEPLOY_DOC = readFileSync(join(ROOT, 'docs/deploy.md'), 'utf8')

const MiB = 2 ** 20
/** A Kubernetes quantity in bytes (memory: Mi, Gi, M, G, plain) or cores (cpu: "2", "500m"). */
function quantity(q: string): number {
  const m = /^([\d.]+)(m|Ki|Mi|Gi|k|M|G)?$/.exec(q)
  assert.ok(m, `quantity ${q}`)
  const unit = { m: 1e-3, Ki: 1024, Mi: MiB, Gi: 2 ** 30, k: 1e3, M: 1e6, G: 1e9 }[m[2] ?? ''] ?? 1
  return Number(m[1]) * unit
}

/**
 * The sizing rule as docs/deploy.md states it, so that the page and the manifests cannot part:
 * memory limit ≥ headroom × (base + perWorker × FAIRVISOR_WORKERS + the store).
 */
function sizingRule(): { headroom: number; base: number; perWorker: number; singleThread: number } {
  const text = DEPLOY_DOC.replace(/\s+/g, ' ')
  const m = /\*\*The rule\*\*: memory limit ≥ ([\d.]+) × \((\d+) MiB \+ (\d+) MiB × `FAIRVISOR_WORKERS` \+ the store\)/.exec(text)
  assert.ok(m, 'docs/deploy.md states the sizing rule')
  const single = /([\d.]+) × `FAIRVISOR_SHARED_DICT_SIZE` with one worker/.exec(text)
  assert.ok(single, 'docs/deploy.md sizes the single-thread store')
  return { headroom: Number(m[1]), base: Number(m[2]) * MiB, perWorker: Number(m[3]) * MiB, singleThread: Number(single[1]) }
}

function checkGateway(objs: K8sObject[]): Record<string, string> {
  const dep = find(objs, 'Deployment', 'fairvisor')
  const pod = dep.spec.template.spec
  assert.equal(pod.containers.length, 1)
  const c = pod.containers[0]!
  const version = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version
  assert.equal(c.image, `fairvisor-node:${version}`, 'the image tag is the version package.json builds')
  assert.match(DOCKERFILE, /ENTRYPOINT \["node", "dist\/cli\.js"\]/, 'the container args assume the Dockerfile entry point')
  assert.deepEqual(c.args, ['serve'])

  const env = environment(objs, c)
  const known = settingsRead()
  for (const name of Object.keys(env)) assert.ok(known.has(name), `${name} is not a setting the gateway reads`)
  const settings = loadSettings(env) // throws naming the variable when a value is refused
  assert.equal(settings.mode, 'reverse_proxy')

  const ports = Object.fromEntries(c.ports.map((p) => [p.name, p.containerPort]))
  assert.deepEqual(ports, { http: settings.port, admin: settings.adminPort })
  for (const [probe, path] of [
    ['livenessProbe', '/livez'],
    ['readinessProbe', '/readyz'],
    ['startupProbe', '/livez'],
  ] as const) {
    assert.deepEqual(c[probe].httpGet, { path, port: 'admin' }, probe)
    assert.ok(ADMIN_ROUTES.includes(`['${path}',`), `${path} is not an admin route`)
  }

  // The bundle: a ConfigMap volume mounted whole (no subPath) where FAIRVISOR_CONFIG_FILE points.
  const mount = c.volumeMounts.find((m) => m.mountPath === settings.configFile)
  assert.ok(mount, `nothing is mounted at FAIRVISOR_CONFIG_FILE (${settings.configFile})`)
  assert.equal(mount.subPath, undefined, 'a subPath mount never sees ConfigMap updates')
  assert.equal(mount.readOnly, true)
  const volume = pod.volumes.find((v) => v.name === mount.name)
  assert.ok(volume?.configMap, 'the bundle volume is a ConfigMap')
  const cm = find(objs, 'ConfigMap', volume.configMap.name)
  assert.equal(cm.metadata.name, 'fairvisor-bundle', 'a fixed name, so an edit updates the mounted files instead of rolling the pods')
  assert.ok(cm.data?.['bundle.json'], 'the ConfigMap holds bundle.json')
  const v = spawnSync(process.execPath, [CLI, 'validate', '-'], { input: cm.data['bundle.json'], encoding: 'utf8', timeout: 10000 })
  assert.equal(v.status, 0, `the ConfigMap's bundle does not validate: ${v.stdout}${v.stderr}`)

  // Non-root, nothing writable, no privileges.
  assert.equal(pod.securityContext.runAsNonRoot, true)
  assert.ok(pod.securityContext.runAsUser > 0)
  assert.deepEqual(c.securityContext, { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } })
  assert.ok(c.resources.requests.cpu && c.resources.requests.memory && c.resources.limits.memory)
  // The pod outlives the gateway's own drain bound.
  assert.ok(pod.terminationGracePeriodSeconds * 1000 > settings.shutdownTimeoutMs + 5000)

  // Service and PodDisruptionBudget select these pods and use the container's port names.
  const labels = dep.spec.template.metadata.labels
  const svc = find(objs, 'Service', 'fairvisor')
  const pdb = find(objs, 'PodDisruptionBudget', 'fairvisor')
  for (const [k, val] of Object.entries(svc.spec.selector)) assert.equal(labels[k], val)
  for (const [k, val] of Object.entries(pdb.spec.selector.matchLabels)) assert.equal(labels[k], val)
  for (const p of svc.spec.ports) assert.ok(p.targetPort in ports, `Service targetPort ${p.targetPort}`)

  checkSizing(c, settings, env)
  checkScrape(dep, settings.adminPort!)
  // Spread: every constraint counts these pods, and one keeps them off a shared node.
  const spread = pod.topologySpreadConstraints ?? []
  for (const s of spread) for (const [k, val] of Object.entries(s.labelSelector.matchLabels)) assert.equal(labels[k], val, s.topologyKey)
  assert.ok(
    spread.some((s) => s.topologyKey === 'kubernetes.io/hostname' && s.maxSkew === 1 && s.whenUnsatisfiable === 'DoNotSchedule'),
    'replicas are kept on different nodes',
  )
  // Behind an Ingress: the controller's network is trusted, and it is not the whole internet
  // (loadSettings refuses 0.0.0.0/0 already); a public address stays the client's own.
  assert.ok(env.FAIRVISOR_TRUSTED_PROXIES, 'FAIRVISOR_TRUSTED_PROXIES is set, for the Ingress controller')
  const privateNets = new BlockList()
  for (const [net, bits] of [
    ['10.0.0.0', 8],
    ['172.16.0.0', 12],
    ['192.168.0.0', 16],
  ] as const)
    privateNets.addSubnet(net, bits)
  for (const cidr of env.FAIRVISOR_TRUSTED_PROXIES.split(','))
    assert.ok(privateNets.check(cidr.trim().split('/')[0]!), `${cidr} is a private network`)
  assert.equal(settings.trustedProxies.check('203.0.113.7'), false)
  return env
}

/**
 * FAIRVISOR_WORKERS is set (unset, it follows the node's cores), one per CPU of the limit, and
 * the memory limit holds what docs/deploy.md's rule says that many workers and this store take.
 */
function checkSizing(c: Container, settings: ReturnType<typeof loadSettings>, env: Record<string, string>): void {
  assert.ok(env.FAIRVISOR_WORKERS, 'FAIRVISOR_WORKERS is set: unset, a pod starts one worker per core of its node')
  const { cpu, memory } = c.resources.limits
  assert.ok(cpu && memory, 'CPU and memory limits are set')
  assert.equal(quantity(cpu), settings.workers, 'one worker per CPU of the limit')
  const rule = sizingRule()
  const inProcess = settings.store === 'memory'
  const store = !inProcess ? 0 : settings.workers === 1 ? rule.singleThread * settings.sharedDictBytes : settings.sharedTableBytes
  const need = rule.headroom * (rule.base + rule.perWorker * settings.workers + store)
  assert.ok(
    quantity(memory) >= need,
    `memory limit ${memory} < ${(need / MiB).toFixed(0)} MiB, what ${settings.workers} workers and the store need (docs/deploy.md)`,
  )
  assert.ok(quantity(c.resources.requests.memory!) <= quantity(memory) && quantity(c.resources.requests.cpu!) <= quantity(cpu))
}

/** The pods' prometheus.io annotations name the admin port and a route the admin listener serves. */
function checkScrape(dep: K8sObject, adminPort: number): void {
  const a = dep.spec.template.metadata.annotations ?? {}
  assert.equal(a['prometheus.io/scrape'], 'true')
  assert.equal(Number(a['prometheus.io/port']), adminPort, 'scraped on the admin port')
  assert.equal(a['prometheus.io/path'], '/metrics')
  assert.ok(ADMIN_ROUTES.includes(`'${a['prometheus.io/path']}'`), '/metrics is an admin route')
}

/** Pods the budget lets a drain evict at once, out of `replicas`. */
function evictable(pdb: K8sObject, replicas: number): number {
  const { minAvailable, maxUnavailable } = pdb.spec
  const count = (v: number | string): number => (typeof v === 'string' ? Math.floor((replicas * Number(v.replace('%', ''))) / 100) : v)
  return maxUnavailable !== undefined ? count(maxUnavailable) : replicas - count(minAvailable!)
}

/** At every replica count the overlay can run, a drain can evict a pod and never the last one. */
function checkDisruptionBudget(objs: K8sObject[], min: number, max: number): void {
  const pdb = find(objs, 'PodDisruptionBudget', 'fairvisor')
  for (let n = min; n <= max; n++) {
    const e = evictable(pdb, n)
    assert.ok(e >= 1 && e <= n - 1, `with ${n} replicas the budget lets ${e} go at once`)
  }
}

/** Every .ts file under src/, recursively. */
function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sources(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  )
}

test('readOnlyRootFilesystem holds: nothing `serve` runs writes to the file system (only the CLI commands write, to --out)', () => {
  for (const file of sources(join(ROOT, 'src'))) {
    if (file.includes('/src/commands/')) continue
    assert.doesNotMatch(
      readFileSync(file, 'utf8'),
      /\b(writeFile|appendFile|createWriteStream|mkdir|mkdtemp|tmpdir)\w*\(/,
      `${file} writes to the file system`,
    )
  }
})

describe('deploy/kubernetes renders with kubectl kustomize and agrees with the code', { skip }, () => {
  test('overlays/in-process: the in-process store', () => {
    const objs = render('overlays/in-process')
    const env = checkGateway(objs)
    assert.equal(env.FAIRVISOR_STORE, 'memory')
    assert.deepEqual(objs.map((o) => o.kind).sort(), ['ConfigMap', 'Deployment', 'PodDisruptionBudget', 'Service'])
    const replicas = find(objs, 'Deployment', 'fairvisor').spec.replicas
    checkDisruptionBudget(objs, replicas, replicas)
  })

  test('overlays/redis: FAIRVISOR_STORE from a Secret, pointing at the Redis Service it ships', () => {
    const objs = render('overlays/redis')
    const env = checkGateway(objs)
    const url = new URL(env.FAIRVISOR_STORE!)
    assert.equal(url.protocol, 'redis:')
    const svc = find(objs, 'Service', url.hostname)
    assert.ok(svc.spec.ports.some((p) => p.port === Number(url.port)))
    const replicas = find(objs, 'Deployment', 'fairvisor').spec.replicas
    checkDisruptionBudget(objs, replicas, replicas)
    const redis = find(objs, 'Deployment', url.hostname)
    for (const [k, val] of Object.entries(svc.spec.selector)) assert.equal(redis.spec.template.metadata.labels[k], val)
    assert.equal(redis.spec.template.spec.containers[0]!.securityContext.readOnlyRootFilesystem, true)
  })

  test('overlays/redis-hpa: the redis overlay plus a HorizontalPodAutoscaler on the gateway', () => {
    const objs = render('overlays/redis-hpa')
    checkGateway(objs)
    const hpa = find(objs, 'HorizontalPodAutoscaler', 'fairvisor')
    assert.equal(hpa.apiVersion, 'autoscaling/v2')
    assert.deepEqual(hpa.spec.scaleTargetRef, { apiVersion: 'apps/v1', kind: 'Deployment', name: 'fairvisor' })
    assert.ok(hpa.spec.minReplicas >= 2)
    checkDisruptionBudget(objs, hpa.spec.minReplicas, hpa.spec.maxReplicas)
  })

  test('servicemonitor: beside an overlay, it scrapes /metrics on the Service port that reaches the admin listener', () => {
    const alone = render('servicemonitor')
    assert.deepEqual(
      alone.map((o) => `${o.apiVersion} ${o.kind}`),
      ['monitoring.coreos.com/v1 ServiceMonitor'],
    )
    // Rendered together with an overlay, as an operator's own kustomization lists them.
    const dir = mkdtempSync(join(tmpdir(), 'fv-k8s-'))
    const bases = ['overlays/redis', 'servicemonitor'].map((d) => `  - ${relative(dir, join(DIR, d))}`)
    writeFileSync(
      join(dir, 'kustomization.yaml'),
      `apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nbases:\n${bases.join('\n')}\n`,
    )
    const objs = render(dir)
    const env = checkGateway(objs)
    const sm = find(objs, 'ServiceMonitor', 'fairvisor')
    const services = objs.filter(
      (o) => o.kind === 'Service' && Object.entries(sm.spec.selector.matchLabels).every(([k, v]) => o.metadata.labels?.[k] === v),
    )
    assert.deepEqual(
      services.map((s) => s.metadata.name),
      ['fairvisor'],
      'it selects the gateway Service, and not Redis',
    )
    const [endpoint] = sm.spec.endpoints
    assert.equal(endpoint?.path, '/metrics')
    const port = services[0]!.spec.ports.find((p) => (p as unknown as { name: string }).name === endpoint!.port)
    assert.equal(port?.targetPort, 'admin', 'the Service port it names leads to the container port admin')
    assert.equal(loadSettings(env).adminPort, 9090)
  })
})
