/**
 * Hot reload when the bundle's whole directory is replaced, through the real
 * gateway process: `rm -rf` of the directory, then a new directory of the
 * same name with a newer bundle. The new version is applied, the log says
 * the directory went and came back, and later writes keep being applied;
 * a SIGHUP also leaves the file watched for the writes after it.
 * Every wait is on a log line (the gateway's own account of each reload).
 */
import assert from 'node:assert/strict'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { perIpBundle } from '../helpers/bundles.js'
import { startBackend, startGateway, type Backend, type GatewayProcess, type LogLine } from '../helpers/processes.js'

/** Each test writes a new version; the per-IP bucket itself is never exhausted here. */
const bundle = (version: number): string => perIpBundle(version)

const applied =
  (version: number) =>
  (l: LogLine): boolean =>
    l.msg === 'bundle applied' && l.version === version
/** Generous: a loaded machine makes the wait longer, not the test red. */
const WAIT_MS = 20_000

describe('the bundle directory removed and recreated', () => {
  let backend: Backend
  let gw: GatewayProcess
  let root: string
  let dir: string
  let file: string
  before(async () => {
    backend = await startBackend()
    root = mkdtempSync(join(tmpdir(), 'fv-reload-dir-'))
    dir = join(root, 'bundles')
    file = join(dir, 'bundle.json')
    mkdirSync(dir)
    writeFileSync(file, bundle(1))
    gw = await startGateway({ FAIRVISOR_BACKEND_URL: backend.url, FAIRVISOR_CONFIG_FILE: file })
    await gw.waitForLog(applied(1))
  })
  after(async () => {
    await gw.stop()
    await backend.close()
    rmSync(root, { recursive: true, force: true })
  })

  test('rm -rf of the directory, a new one with version 2: applied, logged; version 3 written later is applied too', async () => {
    rmSync(dir, { recursive: true, force: true })
    await gw.waitForLog((l) => typeof l.msg === 'string' && l.msg.startsWith('bundle directory removed'), WAIT_MS)
    mkdirSync(dir)
    writeFileSync(file, bundle(2))
    await gw.waitForLog(applied(2), WAIT_MS)
    await gw.waitForLog((l) => typeof l.msg === 'string' && l.msg.startsWith('bundle directory (re)created'), WAIT_MS)
    writeFileSync(file, bundle(3))
    await gw.waitForLog(applied(3), WAIT_MS)
    const r = await fetch(`${gw.url}/readyz`)
    assert.equal(((await r.json()) as { policy_version?: number }).policy_version, 3)
  })

  test('a quick swap (removed and recreated at once) is applied, and so is the next write', async () => {
    rmSync(dir, { recursive: true, force: true })
    mkdirSync(dir)
    writeFileSync(file, bundle(4))
    await gw.waitForLog(applied(4), WAIT_MS)
    writeFileSync(file, bundle(5))
    await gw.waitForLog(applied(5), WAIT_MS)
  })

  test('after a SIGHUP, later writes are still applied', async () => {
    writeFileSync(file, bundle(6))
    await gw.waitForLog(applied(6), WAIT_MS)
    gw.proc.kill('SIGHUP')
    writeFileSync(file, bundle(7))
    await gw.waitForLog(applied(7), WAIT_MS)
    rmSync(dir, { recursive: true, force: true })
    mkdirSync(dir)
    writeFileSync(file, bundle(8))
    await gw.waitForLog(applied(8), WAIT_MS)
    gw.proc.kill('SIGHUP')
    writeFileSync(file, bundle(9))
    await gw.waitForLog(applied(9), WAIT_MS)
  })
})

test('a bundle whose directory does not exist yet: applied once the directory and the file appear', async () => {
  const backend = await startBackend()
  const root = mkdtempSync(join(tmpdir(), 'fv-reload-dir-'))
  const file = join(root, 'later', 'bundle.json')
  const gw = await startGateway({ FAIRVISOR_BACKEND_URL: backend.url, FAIRVISOR_CONFIG_FILE: file })
  try {
    mkdirSync(join(root, 'later'))
    writeFileSync(file, bundle(1))
    await gw.waitForLog(applied(1), WAIT_MS)
    writeFileSync(file, bundle(2))
    await gw.waitForLog(applied(2), WAIT_MS)
  } finally {
    await gw.stop()
    await backend.close()
    rmSync(root, { recursive: true, force: true })
  }
})
