/**
 * deploy/kubernetes renders with `kubectl kustomize` (each overlay) and the
 * rendered objects agree with the code: the image the Dockerfile builds, the
 * ports the settings give, probes on the admin routes the gateway serves,
 * the bundle ConfigMap mounted as a directory at FAIRVISOR_CONFIG_FILE and
 * accepted by `fairvisor validate`, env names the settings read and values
 * they accept, a non-root read-only container.
 */
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
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
  resources: { requests: { cpu?: string; memory?: string }; limits: { memory?: string } }
}

/**
 * The spec fields checked below, of whichever kind has them (Deployment,
 * Service, PodDisruptionBudget, HorizontalPodAutoscaler). Typed, not proven:
 * the rendered YAML is whatever kustomize wrote, and the checks assert it.
 */
interface Spec {
  replicas: number
  template: {
    metadata: { labels: Labels }
    spec: {
      containers: Container[]
      volumes: { name: string; configMap?: { name: string } }[]
      securityContext: { runAsNonRoot: boolean; runAsUser: number }
      terminationGracePeriodSeconds: number
    }
  }
  /** A Service selects by labels; a PodDisruptionBudget by matchLabels. */
  selector: Labels & { matchLabels: Labels }
  ports: { port: number; targetPort: string }[]
  minAvailable: number
  scaleTargetRef: unknown
  minReplicas: number
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

function render(overlay: string): K8sObject[] {
  const r = spawnSync('kubectl', ['kustomize', join(DIR, 'overlays', overlay)], { encoding: 'utf8', timeout: 60000 })
  assert.equal(r.status, 0, `kubectl kustomize overlays/${overlay} failed: ${r.stderr}`)
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
  assert.ok(pdb.spec.minAvailable < dep.spec.replicas, 'a node drain can still evict a pod')
  return env
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
    const objs = render('in-process')
    const env = checkGateway(objs)
    assert.equal(env.FAIRVISOR_STORE, 'memory')
    assert.deepEqual(objs.map((o) => o.kind).sort(), ['ConfigMap', 'Deployment', 'PodDisruptionBudget', 'Service'])
  })

  test('overlays/redis: FAIRVISOR_STORE from a Secret, pointing at the Redis Service it ships', () => {
    const objs = render('redis')
    const env = checkGateway(objs)
    const url = new URL(env.FAIRVISOR_STORE!)
    assert.equal(url.protocol, 'redis:')
    const svc = find(objs, 'Service', url.hostname)
    assert.ok(svc.spec.ports.some((p) => p.port === Number(url.port)))
    const redis = find(objs, 'Deployment', url.hostname)
    for (const [k, val] of Object.entries(svc.spec.selector)) assert.equal(redis.spec.template.metadata.labels[k], val)
    assert.equal(redis.spec.template.spec.containers[0]!.securityContext.readOnlyRootFilesystem, true)
  })

  test('overlays/redis-hpa: the redis overlay plus a HorizontalPodAutoscaler on the gateway', () => {
    const objs = render('redis-hpa')
    checkGateway(objs)
    const hpa = find(objs, 'HorizontalPodAutoscaler', 'fairvisor')
    assert.equal(hpa.apiVersion, 'autoscaling/v2')
    assert.deepEqual(hpa.spec.scaleTargetRef, { apiVersion: 'apps/v1', kind: 'Deployment', name: 'fairvisor' })
    assert.ok(hpa.spec.minReplicas >= 2)
  })
})
