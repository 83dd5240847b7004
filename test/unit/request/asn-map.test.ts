import assert from 'node:assert/strict'
import { test } from 'node:test'
import { SettingError } from '../../../src/errors.js'
import { normaliseAsn, parseAsnMap } from '../../../src/request/asn-map.js'
import { compileDescriptor } from '../../../src/request/descriptors.js'
import { NetworkData } from '../../../src/request/network-data.js'
import { RequestView } from '../../../src/request/view.js'
import { tempFile } from '../../helpers/data-files.js'

test('ASN map: nginx map syntax, comments, AS prefixes', () => {
  const m = parseAsnMap(
    ['# cloud providers', 'map $asn $asn_type {', '  default unknown;', '  13335 hosting;', '  AS7922 isp; # comcast', '}', ''].join('\n'),
    'asn.map',
  )
  assert.deepEqual(
    [...m],
    [
      ['13335', 'hosting'],
      ['7922', 'isp'],
    ],
  )
  assert.equal(normaliseAsn(' AS13335 '), '13335')
})

test('ASN map: a bad line names the setting, the file and the line', () => {
  assert.throws(
    () => parseAsnMap('13335 hosting;\n13336 cloud;\n', 'asn.map'),
    (e: unknown) =>
      e instanceof SettingError &&
      e.message ===
        'FAIRVISOR_ASN_MAP_FILE: asn.map:2: type "cloud" is not one of business, education_research, government_admin, hosting, isp, unrouted, unknown',
  )
  assert.throws(() => parseAsnMap('13335 hosting\n', 'asn.map'), /asn\.map:1: "13335 hosting" is not "<asn> <type>;"/)
})

test('ip:type: X-ASN-Type first, then the map by X-ASN, else unknown', () => {
  const d = compileDescriptor('ip:type')
  assert.ok(d.ok)
  const map = new NetworkData({
    asnMapFile: tempFile('asn.map', '13335 hosting;\n'),
    geoipCountryFile: undefined,
    geoipAsnFile: undefined,
    torExitListFile: undefined,
  })
  const view = (headers: string[], asn?: NetworkData) =>
    new RequestView({ method: 'GET', path: '/', rawQuery: '', host: 'h', rawHeaders: headers, peer: '10.0.0.1' }, undefined, asn)
  assert.equal(d.extract(view(['X-ASN', 'AS13335'], map)), 'hosting')
  assert.equal(d.extract(view(['X-ASN', '13335', 'X-ASN-Type', 'isp'], map)), 'isp')
  assert.equal(d.extract(view(['X-ASN', '64512'], map)), 'unknown')
  assert.equal(d.extract(view(['X-ASN', '13335'])), 'unknown', 'no map configured')
})
