/**
 * The Kubernetes manifests (deploy/kubernetes) mount the bundle ConfigMap as
 * a directory and set FAIRVISOR_CONFIG_FILE to that directory. This builds
 * the layout the kubelet writes there (pkg/volume/util/atomic_writer.go):
 *
 *   ..2026_11_23_10_00_00.000000001/bundle.json   the files of one ConfigMap revision
 *   ..data -> ..2026_11_23_10_00_00.000000001     re-pointed atomically on update
 *   bundle.json -> ..data/bundle.json             what the pod sees
 *
 * and updates it the kubelet's way (new timestamped directory, `..data_tmp`
 * symlink renamed over `..data`, old directory removed), against the real
 * gateway pointed at the directory, and expects each new version applied.
 */
import assert from 'node:assert/strict'
import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { startBackend, startGateway, type Backend, type GatewayProcess } from '../helpers/processes.js'

function bundle(version: number): string {
  return JSON.stringify({
    bundle_version: version,
    policies: [
      {
        id: 'api',
        spec: {
          selector: { pathPrefix: '/' },
          rules: [
            {
              name: 'per_ip',
              limit_keys: ['ip:address'],
              algorithm: 'token_bucket',
              algorithm_config: { tokens_per_second: 1, burst: 100 },
            },
          ],
        },
      },
    ],
  })
}

describe('ConfigMap mounted as a directory (FAIRVISOR_CONFIG_FILE = the mount point): the kubelet `..data` swap reloads the bundle', () => {
  let backend: Backend
  let gw: GatewayProcess
  let mount: string
  let current: string | undefined
  let n = 0

  /** One ConfigMap update, as the kubelet's atomic writer does it. */
  const publish = (version: number): void => {
    n++
    const ts = `..2026_11_23_10_00_${String(n).padStart(2, '0')}.00000000${n}`
    mkdirSync(join(mount, ts))
    writeFileSync(join(mount, ts, 'bundle.json'), bundle(version))
    symlinkSync(ts, join(mount, '..data_tmp'))
    renameSync(join(mount, '..data_tmp'), join(mount, '..data'))
    if (current !== undefined) rmSync(join(mount, current), { recursive: true })
    current = ts
  }

  const appliedVersion = (version: number) => gw.waitForLog((l) => l.msg === 'bundle applied' && l.version === version, 5000)

  before(async () => {
    backend = await startBackend()
    mount = mkdtempSync(join(tmpdir(), 'fv-configmap-'))
    publish(1)
    symlinkSync('..data/bundle.json', join(mount, 'bundle.json'))
    gw = await startGateway({ FAIRVISOR_BACKEND_URL: backend.url, FAIRVISOR_CONFIG_FILE: mount })
    await appliedVersion(1)
  })
  after(async () => {
    await gw?.stop()
    await backend?.close()
    rmSync(mount, { recursive: true, force: true })
  })

  for (const version of [2, 3]) {
    test(`the swap to version ${version} is applied`, async () => {
      publish(version)
      const line = await appliedVersion(version)
      assert.equal(line.version, version)
      const ready = (await (await fetch(`${gw.url}/readyz`)).json()) as { policy_version?: number }
      assert.equal(ready.policy_version, version)
    })
  }
})
