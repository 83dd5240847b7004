/**
 * Careless input through the real gateway process: a reload never lowers
 * protection silently, a missing bundle file is one error line, and (once
 * main.ts passes the key) only signed bundles load when a key is set.
 */
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { signBundle } from '../../src/bundle/signature.js'
import { metricValue, startBackend, startGateway, type Backend, type GatewayProcess } from '../helpers/processes.js'

const IDS = ['a', 'b', 'c', 'd', 'e', 'f']
function sixPolicies(version: number): string {
  return JSON.stringify({
    bundle_version: version,
    policies: IDS.map((id) => ({
      id,
      spec: {
        selector: { pathPrefix: `/${id}/` },
        rules: [
          {
            name: `per_ip_${id}`,
            limit_keys: ['ip:address'],
            algorithm: 'token_bucket',
            algorithm_config: { tokens_per_second: 0.001, burst: 2 },
          },
        ],
      },
    })),
  })
}
const SCHEMA_INVALID = JSON.stringify({ bundle_version: 3, policies: [{ id: 'x', spec: { rules: 'nope' } }] })

async function readyVersion(gw: GatewayProcess): Promise<number | undefined> {
  return ((await (await fetch(`${gw.url}/readyz`)).json()) as { policy_version?: number }).policy_version
}
const reloads = async (gw: GatewayProcess, result: string): Promise<number> =>
  (await metricValue(gw, 'fairvisor_config_reload_total', `result="${result}"`)) ?? 0
async function status(gw: GatewayProcess, path: string): Promise<number> {
  const r = await fetch(`${gw.url}${path}`)
  await r.arrayBuffer()
  return r.status
}
/** Polls `fn` until it holds; the limit is generous so that a loaded machine slows the test, not fails it. */
async function waitFor(what: string, fn: () => Promise<boolean>, ms = 20_000): Promise<void> {
  const end = Date.now() + ms
  while (!(await fn())) {
    if (Date.now() > end) throw new Error(`${what}: not within ${ms} ms`)
    await new Promise((r) => setTimeout(r, 20))
  }
}

let backend: Backend
const dirs: string[] = []
const gateways: GatewayProcess[] = []
before(async () => {
  backend = await startBackend()
})
after(async () => {
  await Promise.all(gateways.map((g) => g.stop()))
  await backend.close()
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})
async function gateway(file: string, env: Record<string, string> = {}): Promise<GatewayProcess> {
  const gw = await startGateway({ FAIRVISOR_BACKEND_URL: backend.url, FAIRVISOR_CONFIG_FILE: file, ...env })
  gateways.push(gw)
  return gw
}
function tmpFile(): string {
  const d = mkdtempSync(join(tmpdir(), 'fv-protect-'))
  dirs.push(d)
  return join(d, 'bundle.json')
}

describe('a 6-policy bundle replaced by a schema-invalid one', () => {
  let gw: GatewayProcess
  let file: string
  before(async () => {
    file = tmpFile()
    writeFileSync(file, sixPolicies(2))
    gw = await gateway(file)
    assert.equal(await readyVersion(gw), 2)
  })

  test('is refused whole: the six policies keep limiting, every problem is an error line, counted invalid', async () => {
    const invalid = await reloads(gw, 'invalid')
    const applied = await reloads(gw, 'applied')
    const seen = gw.logs.length
    writeFileSync(file, SCHEMA_INVALID)
    await waitFor('invalid counted', async () => (await reloads(gw, 'invalid')) === invalid + 1)
    // The metric can be read before the log lines have come through the pipe: wait for all three.
    const mine = (): typeof gw.logs => gw.logs.slice(seen).filter((l) => l.file === file)
    await waitFor('three error lines', async () => mine().length >= 3)
    const lines = mine()
    assert.deepEqual(
      lines.map((l) => [l.level, l.result, l.msg]),
      [
        ['error', 'invalid', `${file}: /policies/0/spec/selector: policy "x": selector is required but missing.`],
        ['error', 'invalid', `${file}: /policies/0/spec/rules: policy "x": rules must be an array, not "nope".`],
        ['error', 'invalid', `${file}: bundle_version 3 refused whole: 2 errors in its policies; the loaded bundle_version 2 stays`],
      ],
    )
    assert.equal(await reloads(gw, 'applied'), applied)
    assert.equal(await readyVersion(gw), 2)
    for (const id of IDS)
      assert.deepEqual([await status(gw, `/${id}/x`), await status(gw, `/${id}/x`), await status(gw, `/${id}/x`)], [200, 200, 429], id)
  })

  test('its version is not consumed: the fixed bundle with the same version applies', async () => {
    writeFileSync(file, sixPolicies(3))
    await waitFor('version 3', async () => (await readyVersion(gw)) === 3)
  })
})

test('a FAIRVISOR_CONFIG_FILE that does not exist: one error line naming it, 503 until it appears, then applied', async () => {
  const file = tmpFile()
  const gw = await gateway(file)
  await gw.waitForLog((l) => l.level === 'error', 20_000)
  const errors = gw.logs.filter((l) => l.level === 'error')
  assert.deepEqual(
    errors.map((l) => l.msg),
    [`${file}: /: the file does not exist (ENOENT).`],
  )
  assert.equal(await status(gw, '/a/x'), 503)
  writeFileSync(file, sixPolicies(1))
  await waitFor('version 1', async () => (await readyVersion(gw)) === 1)
  assert.equal(await status(gw, '/a/x'), 200)
})

// Both wait for src/main.ts (rewritten elsewhere): logReload must log the errors of an applied
// report too, and BundleSource must be built with { signingKey: settings.bundleSigningKey }.

test('at start-up a bundle with a bad policy loads the good ones and logs each dropped one at error', async () => {
  const file = tmpFile()
  writeFileSync(
    file,
    JSON.stringify({ bundle_version: 1, policies: [JSON.parse(sixPolicies(1)).policies[0], { id: 'x', spec: { rules: 'nope' } }] }),
  )
  const gw = await gateway(file)
  await gw.waitForLog((l) => String(l.msg).includes('/policies/1/spec/rules') && l.level === 'error', 20_000)
  assert.deepEqual([await status(gw, '/a/x'), await status(gw, '/a/x'), await status(gw, '/a/x')], [200, 200, 429])
})

test('with FAIRVISOR_BUNDLE_SIGNING_KEY only signed bundles load; an unsigned reload is refused and counted', async () => {
  const key = 's'.repeat(40)
  const file = tmpFile()
  writeFileSync(file, signBundle(Buffer.from(sixPolicies(1)), key))
  const gw = await gateway(file, { FAIRVISOR_BUNDLE_SIGNING_KEY: key })
  assert.equal(await readyVersion(gw), 1)
  const invalid = await reloads(gw, 'invalid')
  writeFileSync(file, sixPolicies(2))
  await gw.waitForLog((l) => String(l.msg).includes('bundle_signature_missing') && l.level === 'error', 20_000)
  assert.equal(await reloads(gw, 'invalid'), invalid + 1)
  assert.equal(await readyVersion(gw), 1)
})
