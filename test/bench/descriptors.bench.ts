/**
 * Per-request cost of the User-Agent and GeoIP descriptors, in ns per call,
 * in this process (no gateway, no network):
 *
 *   - ua:bot_category, cache hit: 300 distinct real-world User-Agents in rotation;
 *   - ua:bot_category, cache miss: every User-Agent new (a browser string with
 *     a counter, so both the named-crawler pattern and isbot scan all of it;
 *     the worst case) and a named crawler (found by the first pattern);
 *   - ip:country: a lookup in a generated country database of 60,000 IPv4
 *     networks and 5,000 IPv6 ones (GeoLite2-Country holds ~500k networks;
 *     the walk is at most 32 steps for IPv4 and 128 for IPv6 whatever the size);
 *   - each through the descriptor extractor on a fresh RequestView, as a
 *     request pays it (that figure includes building the view's header map).
 *
 *   node --import tsx test/bench/descriptors.bench.ts [millions of calls=1]
 */
import { botCategory, classifyUserAgent } from '../../src/request/bots.js'
import { compileDescriptor } from '../../src/request/descriptors.js'
import { GeoDatabase } from '../../src/request/geoip.js'
import { NetworkData } from '../../src/request/network-data.js'
import { RequestView } from '../../src/request/view.js'
import { tempFile } from '../helpers/data-files.js'
import { countryRecord, writeMmdb, type MmdbEntry } from '../helpers/mmdb.js'
import { table } from './lib.js'

const N = Math.round(Number(process.argv[2] ?? 1) * 1_000_000)
let sink = 0

function measure(name: string, n: number, op: (i: number) => unknown): string[] {
  for (let i = 0; i < Math.min(n, 100_000); i++) op(i) // warm-up: let the JIT settle
  const t0 = process.hrtime.bigint()
  for (let i = 0; i < n; i++) if (op(i) !== undefined) sink++
  const ns = Number(process.hrtime.bigint() - t0) / n
  return [name, ns.toFixed(0), String(n)]
}

const BROWSERS = [
  'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36',
  'Mozilla/5.0 (iPhone; CPU iPhone OS 17_4_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4.1 Mobile/15E148 Safari/604.1',
  'Mozilla/5.0 (X11; Linux x86_64; rv:125.0) Gecko/20100101 Firefox/125.0',
]
const BOTS = [
  'Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)',
  'Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)',
  'curl/8.4.0',
]
// 300 distinct strings: versions vary as they do in real traffic.
const HOT = Array.from({ length: 300 }, (_, i) => (i % 4 === 3 ? BOTS[i % 3]! : BROWSERS[i % 3]!).replace(/\d+\.0/, `${100 + i}.0`))

// A country database: /24s spread over the IPv4 space, /48s in 2001:db8::/32 and beyond.
const entries: MmdbEntry[] = []
const codes = ['US', 'DE', 'FR', 'GB', 'JP', 'BR', 'IN', 'NL', 'CA', 'AU']
for (let i = 0; i < 60_000; i++)
  entries.push({
    network: `${1 + (i % 222)}.${(i * 7) % 256}.${Math.floor(i / 222) % 256}.0/24`,
    record: countryRecord(codes[i % codes.length]!),
  })
for (let i = 0; i < 5_000; i++)
  entries.push({ network: `2001:${(0xdb8 + i).toString(16)}::/48`, record: countryRecord(codes[i % codes.length]!) })
const dedup = [...new Map(entries.map((e) => [e.network, e])).values()]
const mmdb = writeMmdb(dedup, 'GeoLite2-Country')
const db = new GeoDatabase(mmdb)
const v4 = Array.from({ length: 1024 }, (_, i) => dedup[(i * 37) % 60_000]!.network.replace('.0/24', `.${i % 250}`))
const v6 = Array.from({ length: 1024 }, (_, i) => `2001:${(0xdb8 + ((i * 13) % 5_000)).toString(16)}::${(i + 1).toString(16)}`)
const net = new NetworkData({
  asnMapFile: undefined,
  geoipCountryFile: tempFile('bench-country.mmdb', mmdb),
  geoipAsnFile: undefined,
  torExitListFile: undefined,
})

const category = compileDescriptor('ua:bot_category')
const country = compileDescriptor('ip:country')
if (!category.ok || !country.ok) throw new Error('descriptors did not compile')
const viewOf = (rawHeaders: string[], peer = '127.0.0.1'): RequestView =>
  new RequestView({ method: 'GET', path: '/', rawQuery: '', host: 'h', rawHeaders, peer }, undefined, net)
const hotViews = HOT.map((ua) => ['User-Agent', ua, 'Accept', '*/*'])

const rows = [['what', 'ns/op', 'calls']]
rows.push(measure('ua:bot_category cache hit: botCategory(ua)', N, (i) => botCategory(HOT[i % 300])))
rows.push(measure('ua:bot_category cache hit: extractor on a new RequestView', N, (i) => category.extract(viewOf(hotViews[i % 300]!))))
rows.push(
  measure('ua:bot_category cache miss, browser (both patterns scan)', N / 10, (i) => classifyUserAgent(`${BROWSERS[i % 3]} build/${i}`)),
)
rows.push(measure('ua:bot_category cache miss, named crawler', N / 10, (i) => classifyUserAgent(`${BOTS[0]} build/${i}`)))
rows.push(
  measure('ua:bot_category cache miss through botCategory (insert included)', N / 10, (i) => botCategory(`${BROWSERS[i % 3]} build/${i}`)),
)
rows.push(measure('ip:country IPv4: GeoDatabase.country(ip)', N, (i) => db.country(v4[i & 1023]!)))
rows.push(measure('ip:country IPv6: GeoDatabase.country(ip)', N, (i) => db.country(v6[i & 1023]!)))
rows.push(measure('ip:country IPv4: extractor on a new RequestView', N, (i) => country.extract(viewOf([], v4[i & 1023]!))))
rows.push(measure('baseline: a new RequestView and one header read', N, (i) => viewOf(hotViews[i % 300]!).header('user-agent')))
console.log(table(rows))
console.log(`(database: ${dedup.length} networks, ${(mmdb.length / 1024).toFixed(0)} KiB; node ${process.version}; checksum ${sink})`)
