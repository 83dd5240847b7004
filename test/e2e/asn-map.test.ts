/** FAIRVISOR_ASN_MAP_FILE through the real gateway: ip:type keys from the operator's map; a bad map exits 2. */
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { CLI, ROOT, startBackend, startGateway } from '../helpers/processes.js'

const dir = mkdtempSync(join(tmpdir(), 'fv-asn-'))
const bundle = join(dir, 'bundle.json')
writeFileSync(
  bundle,
  JSON.stringify({
    bundle_version: 1,
    policies: [
      {
        id: 'by_type',
        spec: {
          selector: { pathPrefix: '/' },
          rules: [
            {
              name: 'per_type',
              limit_keys: ['ip:type'],
              algorithm: 'token_bucket',
              algorithm_config: { tokens_per_second: 0.001, burst: 1 },
            },
          ],
        },
      },
    ],
  }),
)

test('ip:type buckets come from the ASN map', async () => {
  const map = join(dir, 'asn.map')
  writeFileSync(map, '13335 hosting;\n7922 isp;\n')
  const backend = await startBackend()
  const gw = await startGateway({ FAIRVISOR_BACKEND_URL: backend.url, FAIRVISOR_CONFIG_FILE: bundle, FAIRVISOR_ASN_MAP_FILE: map })
  try {
    const get = async (asn: string) => {
      const r = await fetch(`${gw.url}/x`, { headers: { 'x-asn': asn } })
      await r.arrayBuffer()
      return r.status
    }
    // 13335 and AS13335 share the hosting bucket; 7922 is an isp; 64512 is unknown.
    assert.deepEqual(
      [await get('13335'), await get('AS13335'), await get('7922'), await get('64512'), await get('64513')],
      [200, 429, 200, 200, 429],
    )
  } finally {
    await gw.stop()
    await backend.close()
  }
})

test('a bad ASN map stops start-up with exit 2 naming the setting and the line', () => {
  const bad = join(dir, 'bad.map')
  writeFileSync(bad, '13335 hosting;\nnot a line\n')
  const r = spawnSync(process.execPath, [CLI], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH,
      FAIRVISOR_PORT: '0',
      FAIRVISOR_BACKEND_URL: 'http://127.0.0.1:1',
      FAIRVISOR_ASN_MAP_FILE: bad,
      FAIRVISOR_LOG_LEVEL: 'silent',
    },
    encoding: 'utf8',
    timeout: 10_000,
  })
  assert.equal(r.status, 2)
  assert.equal(r.stderr.trim(), `fairvisor: invalid setting FAIRVISOR_ASN_MAP_FILE: ${bad}:2: "not a line" is not "<asn> <type>;"`)
})
