/**
 * The client address through the real gateway, listening dual-stack (`::`)
 * behind a trusted proxy at 127.0.0.1: the socket peer is then
 * `::ffff:127.0.0.1` and must still be the trusted proxy, and every spelling
 * of an IPv4-mapped address in X-Forwarded-For must be the same client (the
 * same bucket) as the plain IPv4 address.
 */
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { perIpBundle } from '../helpers/bundles.js'
import { startBackend, startGateway, type Backend, type GatewayProcess } from '../helpers/processes.js'

describe('ip:address behind a trusted proxy on a dual-stack listener', () => {
  let backend: Backend
  let gw: GatewayProcess
  let dir: string
  before(async () => {
    backend = await startBackend()
    dir = mkdtempSync(join(tmpdir(), 'fv-client-ip-'))
    const file = join(dir, 'bundle.json')
    // One request per client address, then 429 for a long while.
    writeFileSync(file, perIpBundle(1, 1))
    gw = await startGateway({
      FAIRVISOR_HOST: '::',
      FAIRVISOR_BACKEND_URL: backend.url,
      FAIRVISOR_CONFIG_FILE: file,
      FAIRVISOR_TRUSTED_PROXIES: '127.0.0.1',
    })
  })
  after(async () => {
    await gw.stop()
    await backend.close()
    rmSync(dir, { recursive: true, force: true })
  })

  const status = async (xff: string): Promise<number> => (await fetch(`${gw.url}/x`, { headers: { 'x-forwarded-for': xff } })).status

  test('8.8.8.8, then ::ffff:8.8.8.8 and its other spellings: one client, one bucket', async () => {
    assert.equal(await status('8.8.8.8'), 200, 'the first request of 8.8.8.8 (the ::ffff:127.0.0.1 peer is the trusted proxy)')
    for (const spelling of ['::ffff:8.8.8.8', '::FFFF:8.8.8.8', '::ffff:808:808', '0:0:0:0:0:ffff:8.8.8.8', '[::ffff:8.8.8.8]:4711']) {
      assert.equal(await status(spelling), 429, `${spelling} is 8.8.8.8 again`)
    }
    assert.equal(await status('9.9.9.9'), 200, 'another client has its own bucket')
    assert.equal(await status('::ffff:9.9.9.9'), 429)
  })

  test('IPv6 spellings of one address are one client', async () => {
    assert.equal(await status('2001:db8::7'), 200)
    assert.equal(await status('2001:DB8:0:0:0:0:0:7'), 429)
  })
})
