/** ip:country, ip:asn, ip:type and ip:tor from the operator's data files (GeoIP .mmdb, Tor exit list), and their reload. */
import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'
import { test } from 'node:test'
import { SettingError } from '../../../src/errors.js'
import { compileDescriptor } from '../../../src/request/descriptors.js'
import { GeoDatabase } from '../../../src/request/geoip.js'
import { NetworkData, type DataLog } from '../../../src/request/network-data.js'
import { canonicalIp, isTorExit, parseTorExits } from '../../../src/request/tor-exits.js'
import type { NetworkFiles } from '../../../src/settings.js'
import { replaceAtomically, tempFile } from '../../helpers/data-files.js'
import { asnRecord, countryRecord, writeMmdb } from '../../helpers/mmdb.js'
import { RequestView } from '../../../src/request/view.js'

const COUNTRY = writeMmdb(
  [
    { network: '81.2.69.0/24', record: countryRecord('GB') },
    { network: '81.2.69.128/25', record: countryRecord('DE') },
    { network: '2001:db8::/32', record: countryRecord('JP') },
    // Only a registered country, as GeoLite2 has for some anycast ranges.
    { network: '198.51.100.0/24', record: { registered_country: { iso_code: 'US' } } },
  ],
  'GeoLite2-Country',
)
const ASN = writeMmdb(
  [
    { network: '1.1.1.0/24', record: asnRecord(13335, 'Cloudflare') },
    { network: '2606:4700::/32', record: asnRecord(13335, 'Cloudflare') },
    { network: '24.0.0.0/12', record: asnRecord(7922, 'Comcast') },
  ],
  'GeoLite2-ASN',
)

const NONE: NetworkFiles = { asnMapFile: undefined, geoipCountryFile: undefined, geoipAsnFile: undefined, torExitListFile: undefined }
const net = (files: Partial<NetworkFiles>): NetworkData => new NetworkData({ ...NONE, ...files })

function get(key: string, data: NetworkData, peer: string, headers: Record<string, string> = {}): string | undefined {
  const d = compileDescriptor(key)
  assert.ok(d.ok, key)
  return d.extract(
    new RequestView(
      { method: 'GET', path: '/', rawQuery: '', host: 'h', rawHeaders: Object.entries(headers).flat(), peer },
      undefined,
      data,
    ),
  )
}

test('GeoDatabase: country (IPv4 and IPv6, most specific network), registered country as a stand-in, nothing outside', () => {
  const db = new GeoDatabase(COUNTRY)
  assert.equal(db.type, 'GeoLite2-Country')
  assert.deepEqual(
    ['81.2.69.1', '81.2.69.200', '2001:db8::7', '198.51.100.9', '81.2.70.1', '2001:db9::1', 'not-an-ip', 'fe80::1%eth0'].map((ip) =>
      db.country(ip),
    ),
    ['GB', 'DE', 'JP', 'US', undefined, undefined, undefined, undefined],
  )
  assert.equal(new GeoDatabase(ASN).asn('2606:4700::1111'), '13335')
})

test('GeoDatabase: bytes that are not a MaxMind DB are refused', () => {
  assert.throws(() => new GeoDatabase(Buffer.from('not a database at all')))
  assert.throws(() => new GeoDatabase(COUNTRY.subarray(0, COUNTRY.length - 40)), 'a truncated copy')
})

test('ip:country and ip:asn: the edge headers win, the databases answer when they are absent', () => {
  const data = net({ geoipCountryFile: tempFile('c.mmdb', COUNTRY), geoipAsnFile: tempFile('a.mmdb', ASN) })
  assert.equal(get('ip:country', data, '81.2.69.1'), 'GB')
  assert.equal(get('ip:country', data, '81.2.69.1', { 'X-Country-Code': 'fr' }), 'FR')
  assert.equal(get('ip:country', data, '2001:db8::1'), 'JP')
  assert.equal(get('ip:country', data, '192.0.2.1'), undefined, 'not in the database: missing')
  assert.equal(get('ip:asn', data, '1.1.1.1'), '13335')
  assert.equal(get('ip:asn', data, '1.1.1.1', { 'X-ASN': '64512' }), '64512')
  assert.equal(get('ip:asn', data, '24.1.2.3'), '7922')
  assert.equal(get('ip:asn', net({}), '1.1.1.1'), undefined, 'no database configured')
})

test('ip:type uses the ASN from the database when X-ASN is absent', () => {
  const data = net({ geoipAsnFile: tempFile('a2.mmdb', ASN), asnMapFile: tempFile('t.map', '13335 hosting;\n7922 isp;\n') })
  assert.equal(get('ip:type', data, '1.1.1.1'), 'hosting')
  assert.equal(get('ip:type', data, '2606:4700::1'), 'hosting')
  assert.equal(get('ip:type', data, '24.1.2.3'), 'isp')
  assert.equal(get('ip:type', data, '24.1.2.3', { 'X-ASN': '13335' }), 'hosting')
  assert.equal(get('ip:type', data, '192.0.2.1'), 'unknown')
})

test('Tor exit list: comments, blank lines, IPv6 in any spelling; bad lines and empty lists are refused', () => {
  const list = parseTorExits('# Tor bulk exit list\n185.220.101.1\n\n2001:DB8:0:0::1 # v6\n::ffff:5.6.7.8\n', 'exits')
  assert.deepEqual([...list], ['185.220.101.1', '2001:db8::1', '5.6.7.8'])
  assert.equal(isTorExit(list, '185.220.101.1'), true)
  assert.equal(isTorExit(list, '2001:db8:0000::0001'), true)
  assert.equal(isTorExit(list, '185.220.101.2'), false)
  assert.equal(canonicalIp('::FFFF:1.2.3.4'), '1.2.3.4')
  assert.throws(() => parseTorExits('1.2.3.4\n185.220.101\n', 'exits'), /exits:2: "185\.220\.101" is not an IP address/)
  assert.throws(() => parseTorExits('# nothing\n', 'exits'), /exits holds no addresses/)
})

test('ip:tor: X-Tor-Exit wins; without it the exit list; without a list "false"', () => {
  const data = net({ torExitListFile: tempFile('exits.txt', '185.220.101.1\n2001:db8::1\n') })
  assert.equal(get('ip:tor', data, '185.220.101.1'), 'true')
  assert.equal(get('ip:tor', data, '2001:db8::1'), 'true')
  assert.equal(get('ip:tor', data, '203.0.113.1'), 'false')
  assert.equal(get('ip:tor', data, '185.220.101.1', { 'X-Tor-Exit': 'no' }), 'false')
  assert.equal(get('ip:tor', data, '203.0.113.1', { 'X-Tor-Exit': 'yes' }), 'true')
  assert.equal(get('ip:tor', net({}), '185.220.101.1'), 'false')
})

test('a missing or malformed file at start is a SettingError naming the variable', () => {
  const cases: [Partial<NetworkFiles>, string, RegExp][] = [
    [{ geoipCountryFile: '/nonexistent/c.mmdb' }, 'FAIRVISOR_GEOIP_COUNTRY_FILE', /cannot read \/nonexistent\/c\.mmdb \(ENOENT\)/],
    [{ geoipAsnFile: tempFile('junk.mmdb', 'junk') }, 'FAIRVISOR_GEOIP_ASN_FILE', /junk\.mmdb: /],
    [{ torExitListFile: tempFile('bad-exits', 'nope\n') }, 'FAIRVISOR_TOR_EXIT_LIST_FILE', /bad-exits:1: "nope" is not an IP address/],
    [{ asnMapFile: '/nonexistent/asn.map' }, 'FAIRVISOR_ASN_MAP_FILE', /cannot read/],
  ]
  for (const [files, variable, msg] of cases) {
    assert.throws(
      () => net(files),
      (e: unknown) => e instanceof SettingError && e.variable === variable && msg.test(e.message),
      variable,
    )
  }
})

class Log implements DataLog {
  lines: { level: string; msg: string; fields: object }[] = []
  info(fields: object, msg: string): void {
    this.lines.push({ level: 'info', msg, fields })
  }
  error(fields: object, msg: string): void {
    this.lines.push({ level: 'error', msg, fields })
  }
}

async function until(pred: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 100 && !pred(); i++) await sleep(50)
  assert.ok(pred(), what)
  // Events within the 100 ms debounce fold into one reload; leave a gap before the next replacement.
  await sleep(200)
}

test('replaced files are reloaded; a bad replacement is logged at error and the last good data stays', async () => {
  const exits = tempFile('reload-exits.txt', '185.220.101.1\n')
  const country = tempFile('reload-c.mmdb', COUNTRY)
  const data = net({ torExitListFile: exits, geoipCountryFile: country })
  const log = new Log()
  await data.watch(log, 20)
  try {
    assert.equal(data.torExit('203.0.113.7'), false)
    replaceAtomically(exits, '185.220.101.1\n203.0.113.7\n')
    await until(() => data.torExit('203.0.113.7') === true, 'the new exit list is used')
    replaceAtomically(exits, '203.0.113.7\ngarbage\n')
    await until(() => log.lines.some((l) => l.level === 'error'), `the bad list is logged: ${JSON.stringify(log.lines)}`)
    assert.equal(data.torExit('185.220.101.1'), true, 'the last good list stays')

    replaceAtomically(country, writeMmdb([{ network: '81.2.69.0/24', record: countryRecord('NL') }]))
    await until(() => data.country('81.2.69.1') === 'NL', 'the new database is used')
    replaceAtomically(country, Buffer.from('half a file'))
    await until(() => log.lines.filter((l) => l.level === 'error').length >= 2, 'the bad database is logged')
    assert.equal(data.country('81.2.69.1'), 'NL')
    assert.ok(log.lines.some((l) => l.msg === 'data file reloaded'))
  } finally {
    await data.close()
  }
})
