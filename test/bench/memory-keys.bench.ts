/**
 * One million distinct keys through the in-process store at its default bound
 * (FAIRVISOR_SHARED_DICT_SIZE=128m): all must be held (none refused). Prints
 * the keys held, the bytes charged against the bound, process RSS before and
 * after (and per key), and apply() ns/op.
 *
 *   node --import tsx test/bench/memory-keys.bench.ts [keys]
 */
import { runInNewContext } from 'node:vm'
import { setFlagsFromString } from 'node:v8'
import { loadSettings } from '../../src/settings.js'
import { ENTRY_OVERHEAD_BYTES, MemoryStore } from '../../src/store/memory/store.js'
import type { Check } from '../../src/store/store.js'
import { bucketLimit } from '../../src/algorithms/kinds/token-bucket/kind.js'

setFlagsFromString('--expose-gc')
const gc = runInNewContext('gc') as () => void

const KEYS = Number(process.argv[2] ?? 1_000_000)
const MB = 1024 * 1024
const settings = loadSettings({ FAIRVISOR_BACKEND_URL: 'http://127.0.0.1:1' })
const maxBytes = settings.sharedDictBytes

function rss(): number {
  gc()
  gc()
  return process.memoryUsage().rss
}

// A realistic counter key: rule name plus a user id (`tb:<rule>:<composite>`).
const keyOf = (i: number): string => `tb:per_user:user-${String(i).padStart(7, '0')}`
const check: Check = { key: '', limit: bucketLimit(10, 100), cost: 1, shadow: false }
const checks = [check]

const rssBefore = rss()
const store = new MemoryStore({ maxBytes })
const now = 1_700_000_000
const t0 = process.hrtime.bigint()
for (let i = 0; i < KEYS; i++) {
  check.key = keyOf(i)
  store.applyNow(checks, now + i * 1e-6)
}
const insertNs = Number(process.hrtime.bigint() - t0)
const rssAfter = rss()

// Hits on existing keys (the steady state of a busy gateway): same million keys again.
const t1 = process.hrtime.bigint()
for (let i = 0; i < KEYS; i++) {
  check.key = keyOf(i)
  store.applyNow(checks, now + 1 + i * 1e-6)
}
const hitNs = Number(process.hrtime.bigint() - t1)

// Floor for comparison: a bare Map<string, number> lookup of the same fresh key strings.
const floor = new Map<string, number>()
for (let i = 0; i < KEYS; i++) floor.set(keyOf(i), i)
let sink = 0
const t2 = process.hrtime.bigint()
for (let i = 0; i < KEYS; i++) sink += floor.get(keyOf(i))!
const floorNs = Number(process.hrtime.bigint() - t2)
if (sink < 0) console.log(sink)

const perKeyRss = (rssAfter - rssBefore) / KEYS
console.log(
  `memory store, ${KEYS.toLocaleString('en')} distinct keys of ${keyOf(0).length} chars, bound ${(maxBytes / MB).toFixed(0)} MiB (FAIRVISOR_SHARED_DICT_SIZE default)`,
)
console.log(`  keys held        ${store.size.toLocaleString('en')} (refused for want of room: ${store.full})`)
console.log(
  `  bytes charged    ${store.bytesUsed.toLocaleString('en')} = ${(store.bytesUsed / MB).toFixed(1)} MiB of ${(maxBytes / MB).toFixed(0)} MiB (${ENTRY_OVERHEAD_BYTES} + key length per key)`,
)
console.log(
  `  RSS before/after ${(rssBefore / MB).toFixed(1)} MiB / ${(rssAfter / MB).toFixed(1)} MiB → ${perKeyRss.toFixed(1)} bytes per key`,
)
console.log(`  apply() new key  ${(insertNs / KEYS).toFixed(0)} ns/op`)
console.log(`  apply() hit      ${(hitNs / KEYS).toFixed(0)} ns/op (key string built per op included)`)
console.log(
  `  floor: Map.get   ${(floorNs / KEYS).toFixed(0)} ns/op on the same ${KEYS.toLocaleString('en')} keys (cache-cold hash lookup dominates)`,
)
const ok = store.size === KEYS && store.full === 0
console.log(ok ? '  OK: every key held, none refused' : '  FAIL: keys were refused under the default bound')
process.exitCode = ok ? 0 : 1
