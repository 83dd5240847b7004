/**
 * The Kubernetes manifests (deploy/kubernetes) mount the bundle ConfigMap as
 * a directory and set FAIRVISOR_CONFIG_FILE to that directory. This builds
 * the layout the kubelet writes there and updates it the kubelet's way
 * (test/helpers/configmap.ts), against the real gateway pointed at the
 * directory, and expects each new version applied.
 */
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { perIpBundle } from '../helpers/bundles.js'
import { configMapVolume, type ConfigMapVolume } from '../helpers/configmap.js'
import { startBackend, startGateway, type Backend, type GatewayProcess } from '../helpers/processes.js'

describe('ConfigMap mounted as a directory (FAIRVISOR_CONFIG_FILE = the mount point): the kubelet `..data` swap reloads the bundle', () => {
  let backend: Backend
  let gw: GatewayProcess
  let volume: ConfigMapVolume

  const appliedVersion = (version: number) => gw.waitForLog((l) => l.msg === 'bundle applied' && l.version === version, 5000)

  before(async () => {
    backend = await startBackend()
    volume = configMapVolume(mkdtempSync(join(tmpdir(), 'fv-configmap-')), perIpBundle(1))
    gw = await startGateway({ FAIRVISOR_BACKEND_URL: backend.url, FAIRVISOR_CONFIG_FILE: volume.mount })
    await appliedVersion(1)
  })
  after(async () => {
    await gw?.stop()
    await backend?.close()
    if (volume) rmSync(volume.mount, { recursive: true, force: true })
  })

  for (const version of [2, 3]) {
    test(`the swap to version ${version} is applied`, async () => {
      volume.publish(perIpBundle(version))
      const line = await appliedVersion(version)
      assert.equal(line.version, version)
      const ready = (await (await fetch(`${gw.url}/readyz`)).json()) as { policy_version?: number }
      assert.equal(ready.policy_version, version)
    })
  }
})
