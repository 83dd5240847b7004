/**
 * A lease table too small for the hot keys (real Redis, a private
 * redis-server): 10 keys, 4 cells. The 4 keys that get a cell spend from
 * slices; the 6 others find their group full and are decided exactly, one
 * store call per request, counted (fairvisor_lease_table_full_total) and
 * reported. Every key, leased or not, is granted exactly its burst: no more.
 */
import assert from 'node:assert/strict'
import { after, before, it } from 'node:test'
import type { LeaseDescription } from '../../src/algorithms/algorithm.js'
import { bucketLimit, type BucketLimit } from '../../src/algorithms/kinds/token-bucket/kind.js'
import { LeasingStore } from '../../src/store/leasing.js'
import { RedisStore } from '../../src/store/redis/store.js'
import { parseRedisUrl } from '../../src/store/redis/url.js'
import { LeaseTable } from '../../src/store/threads/leases.js'
import { applyAsync } from '../helpers/store.js'
import { readBucket, startRedis, type RedisServer } from '../helpers/redis-servers.js'

const BURST = 30
const SLICE = 5
const KEYS = 10
const ROUNDS = 40
const limit = { ...bucketLimit(0.001, BURST), lease: { tokens: SLICE, ttlMs: 60_000 } as LeaseDescription } as BucketLimit

let server: RedisServer
before(async () => {
  server = await startRedis()
})
after(async () => {
  await server.stop()
})

it('10 hot keys, 4 cells: the 6 without a cell are decided exactly, one call a request, and no key gets more than its burst', async () => {
  let reported = 0
  const table = LeaseTable.create(4)
  assert.equal(table.cells, 4, 'one group of 4 cells')
  const s = new LeasingStore(new RedisStore({ target: parseRedisUrl(server.url), timeoutMs: 1000 }), Date.now, table, () => reported++)
  try {
    assert.equal(await s.ready(3000), true)
    const keys = Array.from({ length: KEYS }, (_, i) => `tb:full:k${i}`)
    const granted = keys.map(() => 0)
    // One request per key per round, all keys at once: in round 1 keys 0–3 take the 4 cells (apply runs in call order), 4–9 find none.
    for (let round = 0; round < ROUNDS; round++) {
      const out = await Promise.all(keys.map((key) => applyAsync(s, [{ key, cost: 1, shadow: false, limit }], 0)))
      out.forEach((o, i) => {
        if (o[0]!.allowed) granted[i]!++
      })
    }
    assert.deepEqual(granted, Array(KEYS).fill(BURST), 'each key granted exactly its burst, leased or not')
    for (const key of keys) {
      const left = readBucket((...a) => server.cli(...a), key)?.tokens ?? NaN
      assert.ok(left >= 0 && left < 0.5, `${key}: the bucket is drained, not overdrawn: ${left}`)
    }
    const exactKeys = KEYS - 4
    assert.equal(s.leaseTableFull(), exactKeys * ROUNDS, 'every request on a key without a cell is counted')
    assert.equal(reported, exactKeys * ROUNDS, 'and reported')
    // A leased key: 6 slices for its 30 tokens, then a slice that does not fit plus its exact call, then 9 exact calls.
    const leasedCalls = BURST / SLICE + 2 + (ROUNDS - BURST - 1)
    assert.equal(s.calls, exactKeys * ROUNDS + 4 * leasedCalls, 'keys without a cell: one store call per request')
  } finally {
    await s.close()
  }
})
