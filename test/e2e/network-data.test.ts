/**
 * ua:bot_category, ip:country from a GeoIP database and ip:tor from an exit
 * list, through the real gateway process in front of a real backend.
 */
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { after, before, test } from 'node:test'
import { join } from 'node:path'
import { CLI, ROOT, startBackend, startGateway, type Backend, type GatewayProcess } from '../helpers/processes.js'
import { dataDir, replaceAtomically, tempFile } from '../helpers/data-files.js'
import { countryRecord, writeMmdb } from '../helpers/mmdb.js'

const GPTBOT = 'Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)'
const CHROME = 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36'
const rule = (name: string, keys: string[], path: string) => ({
  id: name,
  spec: {
    selector: { pathPrefix: path },
    rules: [{ name, limit_keys: keys, algorithm: 'token_bucket', algorithm_config: { tokens_per_second: 0.001, burst: 2 } }],
  },
})
const bundle = tempFile(
  'bundle.json',
  JSON.stringify({
    bundle_version: 1,
    policies: [
      rule('per_bot_category', ['ua:bot_category'], '/bots/'),
      rule('per_country', ['ip:country'], '/geo/'),
      rule('per_tor', ['ip:tor'], '/tor/'),
    ],
    kill_switches: [{ scope_key: 'ua:bot_category', scope_value: 'seo_research', reason: 'no SEO crawls', route: '/bots/x' }],
  }),
)
// The gateway sees 127.0.0.1 as the client; X-Forwarded-For from a trusted loopback peer stands for other clients.
const country = tempFile(
  'country.mmdb',
  writeMmdb([
    { network: '203.0.113.0/24', record: countryRecord('DE') },
    { network: '198.51.100.0/24', record: countryRecord('FR') },
    { network: '2001:db8::/32', record: countryRecord('DE') },
  ]),
)
const exits = tempFile('exits.txt', '# test exit list\n192.0.2.66\n')

let backend: Backend
let gw: GatewayProcess
before(async () => {
  backend = await startBackend()
  gw = await startGateway({
    FAIRVISOR_BACKEND_URL: backend.url,
    FAIRVISOR_CONFIG_FILE: bundle,
    FAIRVISOR_TRUSTED_PROXIES: '127.0.0.1',
    FAIRVISOR_GEOIP_COUNTRY_FILE: country,
    FAIRVISOR_TOR_EXIT_LIST_FILE: exits,
  })
})
after(async () => {
  await gw?.stop()
  await backend?.close()
})

async function statuses(path: string, headers: Record<string, string>, n: number): Promise<number[]> {
  const out: number[] = []
  for (let i = 0; i < n; i++) {
    const r = await fetch(`${gw.url}${path}`, { headers })
    await r.arrayBuffer()
    out.push(r.status)
  }
  return out
}

test('a rule keyed on ua:bot_category limits GPTBot and leaves a browser alone', async () => {
  assert.deepEqual(await statuses('/bots/a', { 'user-agent': GPTBOT }, 3), [200, 200, 429])
  assert.deepEqual(await statuses('/bots/a', { 'user-agent': CHROME }, 4), [200, 200, 200, 200], 'no category: the rule does not apply')
})

test('a kill switch on ua:bot_category fires for that category only', async () => {
  const seo = 'Mozilla/5.0 (compatible; AhrefsBot/7.0; +http://ahrefs.com/robot/)'
  const r = await fetch(`${gw.url}/bots/x`, { headers: { 'user-agent': seo } })
  await r.arrayBuffer()
  assert.equal(r.status, 429)
  assert.equal(r.headers.get('x-fairvisor-reason'), 'kill_switch')
  assert.deepEqual(await statuses('/bots/x', { 'user-agent': CHROME }, 1), [200])
})

test('a per-country rule limits by the database country (IPv4 and IPv6 clients share DE)', async () => {
  assert.deepEqual(await statuses('/geo/a', { 'x-forwarded-for': '203.0.113.5' }, 2), [200, 200])
  assert.deepEqual(await statuses('/geo/a', { 'x-forwarded-for': '2001:db8::9' }, 1), [429], 'same country, same bucket')
  assert.deepEqual(await statuses('/geo/a', { 'x-forwarded-for': '198.51.100.5' }, 2), [200, 200], 'FR has its own bucket')
  assert.deepEqual(
    await statuses('/geo/a', { 'x-forwarded-for': '198.51.100.5', 'x-country-code': 'it' }, 1),
    [200],
    'the edge header wins over the database',
  )
})

test('a replaced Tor exit list takes effect without a restart', async () => {
  // 192.0.2.66 is on the list ("true" bucket), 192.0.2.77 is not ("false" bucket).
  assert.deepEqual(await statuses('/tor/a', { 'x-forwarded-for': '192.0.2.77' }, 3), [200, 200, 429])
  assert.deepEqual(await statuses('/tor/a', { 'x-forwarded-for': '192.0.2.66' }, 1), [200])
  replaceAtomically(exits, '# replaced\n192.0.2.77\n')
  await gw.waitForLog((l) => l.msg === 'data file reloaded' && l.setting === 'FAIRVISOR_TOR_EXIT_LIST_FILE')
  // Now the other way round: .77 draws on the "true" bucket (one token left), .66 on the empty "false" one.
  assert.deepEqual(await statuses('/tor/a', { 'x-forwarded-for': '192.0.2.77' }, 1), [200])
  assert.deepEqual(await statuses('/tor/a', { 'x-forwarded-for': '192.0.2.66' }, 1), [429])
})

test('a missing GeoIP file stops start-up with exit 2 and one line naming the setting', () => {
  const missing = join(dataDir(), 'absent.mmdb')
  const r = spawnSync(process.execPath, [CLI], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH,
      FAIRVISOR_PORT: '0',
      FAIRVISOR_BACKEND_URL: 'http://127.0.0.1:1',
      FAIRVISOR_GEOIP_COUNTRY_FILE: missing,
      FAIRVISOR_LOG_LEVEL: 'silent',
    },
    encoding: 'utf8',
    timeout: 10_000,
  })
  assert.equal(r.status, 2)
  assert.equal(r.stderr.trim(), `fairvisor: invalid setting FAIRVISOR_GEOIP_COUNTRY_FILE: cannot read ${missing} (ENOENT)`)
})

test('fairvisor test shows the looked-up values', () => {
  const requests = tempFile(
    'requests.jsonl',
    [JSON.stringify({ path: '/geo/a', ip: '203.0.113.5' }), JSON.stringify({ path: '/bots/a', headers: { 'user-agent': GPTBOT } })].join(
      '\n',
    ),
  )
  const r = spawnSync(process.execPath, [CLI, 'test', bundle, '--requests', requests], {
    cwd: ROOT,
    env: { PATH: process.env.PATH, FAIRVISOR_GEOIP_COUNTRY_FILE: country },
    encoding: 'utf8',
    timeout: 10_000,
  })
  assert.equal(r.status, 0, r.stderr)
  assert.match(r.stdout, /descriptors: ip:country=DE/)
  assert.match(r.stdout, /descriptors: ua:bot_category=ai_crawler/)
})
