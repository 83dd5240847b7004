/**
 * Token leases on a real Redis (a private redis-server): calls per request,
 * exactness (never more than the bucket grants), the fall-back to exact
 * calls when a slice no longer fits, give-back on close and on a limit
 * change, all-or-nothing with a non-leased limit of the same request.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import type { LeaseDescription } from '../../../src/algorithms/algorithm.js'
import { bucketLimit, type BucketLimit } from '../../../src/algorithms/kinds/token-bucket/kind.js'
import { LeasingStore } from '../../../src/store/leasing.js'
import { RedisStore } from '../../../src/store/redis/store.js'
import { parseRedisUrl } from '../../../src/store/redis/url.js'
import type { Check } from '../../../src/store/store.js'
import { applyAsync, tbCheck } from '../../helpers/store.js'
import { waitFor } from '../../helpers/wait.js'
import { readBucket, startRedis, type RedisServer } from '../../helpers/redis-servers.js'

const leased = (key: string, burst: number, slice: number, ttlMs = 60_000, limit?: BucketLimit): Check => ({
  key,
  cost: 1,
  shadow: false,
  limit: limit ?? ({ ...bucketLimit(0.001, burst), lease: { tokens: slice, ttlMs } as LeaseDescription } as BucketLimit),
})

describe('token leases on Redis', () => {
  let server: RedisServer
  const stores: LeasingStore[] = []
  const open = async (): Promise<LeasingStore> => {
    const s = new LeasingStore(new RedisStore({ target: parseRedisUrl(server.url), timeoutMs: 1000 }), Date.now)
    assert.equal(await s.ready(3000), true)
    stores.push(s)
    return s
  }
  const tokens = (key: string): number => readBucket((...a) => server.cli(...a), key)?.tokens ?? NaN
  before(async () => {
    server = await startRedis()
  })
  after(async () => {
    for (const s of stores) await s.close()
    await server.stop()
  })

  it('100 requests with a slice of 20: 5 store calls, and the bucket shows exactly what was spent', async () => {
    const s = await open()
    const limit = leased('tb:lease:a', 1000, 20).limit
    for (let i = 0; i < 100; i++)
      assert.equal((await applyAsync(s, [leased('tb:lease:a', 1000, 20, 60_000, limit as BucketLimit)], 0))[0]!.allowed, true)
    assert.equal(s.calls, 5)
    assert.ok(Math.abs(tokens('tb:lease:a') - 900) < 0.1)
    await applyAsync(s, [leased('tb:lease:a', 1000, 20, 60_000, limit as BucketLimit)], 0)
    assert.ok(Math.abs(tokens('tb:lease:a') - 880) < 0.1, 'a sixth slice taken')
    await s.close()
    stores.pop()
    assert.ok(Math.abs(tokens('tb:lease:a') - 899) < 0.1, `close gave the 19 unspent tokens back: ${tokens('tb:lease:a')}`)
  })

  it('a nearly empty bucket: the slice that does not fit is decided exactly; never more than the burst', async () => {
    const s = await open()
    const limit = leased('x', 30, 20).limit as BucketLimit
    const allowed: boolean[] = []
    for (let i = 0; i < 35; i++) allowed.push((await applyAsync(s, [leased('tb:lease:b', 30, 20, 60_000, limit)], 0))[0]!.allowed)
    assert.equal(allowed.filter(Boolean).length, 30)
    assert.deepEqual(allowed.slice(28), [true, true, false, false, false, false, false])
  })

  it('200 parallel requests on a burst of 50 with slices of 20 (two stores): never more than 50 granted', async () => {
    const [a, b] = [await open(), await open()]
    const limit = leased('x', 50, 20).limit as BucketLimit
    const res = await Promise.all(
      Array.from({ length: 200 }, (_, i) => applyAsync(i % 2 ? a : b, [leased('tb:lease:c', 50, 20, 60_000, limit)], 0)),
    )
    const granted = res.filter((o) => o[0]!.allowed).length
    assert.ok(granted <= 50, `over-grant: ${granted}`)
    assert.ok(granted >= 30, `each store can strand at most one slice: ${granted}`)
  })

  it('a rejecting non-leased limit in the same request: nothing is spent from the lease', async () => {
    const s = await open()
    const limit = leased('x', 100, 10).limit as BucketLimit
    await applyAsync(s, [leased('tb:lease:d', 100, 10, 60_000, limit)], 0) // slice taken, 9 left locally
    await applyAsync(s, [tbCheck('tb:lease:d-empty', 1, 0.001)], 0)
    const calls = s.calls
    const r = await applyAsync(s, [leased('tb:lease:d', 100, 10, 60_000, limit), tbCheck('tb:lease:d-empty', 1, 0.001)], 0)
    assert.deepEqual(
      r.map((o) => o?.allowed),
      [true, false],
    )
    for (let i = 0; i < 9; i++) assert.equal((await applyAsync(s, [leased('tb:lease:d', 100, 10, 60_000, limit)], 0))[0]!.allowed, true)
    assert.equal(s.calls, calls + 1, 'the 9 local tokens were all still there: no further call')
  })

  it('a new limit for the key (a bundle reload) gives the old lease back; an expired lease is given back too', async () => {
    const s = await open()
    await applyAsync(s, [leased('tb:lease:e', 100, 20)], 0)
    assert.ok(Math.abs(tokens('tb:lease:e') - 80) < 0.1)
    await applyAsync(s, [leased('tb:lease:e', 100, 20, 30_000)], 0) // another lease period: old lease (19) returned, new slice taken
    assert.ok(Math.abs(tokens('tb:lease:e') - (80 + 19 - 20)) < 0.1, `${tokens('tb:lease:e')}`)
    await applyAsync(s, [leased('tb:lease:f', 100, 20, 100)], 0)
    assert.ok(Math.abs(tokens('tb:lease:f') - 80) < 0.1, 'the slice is taken')
    await waitFor(() => Math.abs(tokens('tb:lease:f') - 99) < 0.1, 'the expired lease (100 ms) gives its 19 unspent tokens back')
  })

  it('bookkeeping is bounded: 3,000 keys whose slice does not fit go exact for the TTL, then nothing is left of them', async () => {
    const s = await open()
    // A slice of 50 on a burst of 10 never fits (validate warns about such a lease): every key goes exact.
    const limit = leased('x', 10, 50, 1000).limit as BucketLimit
    const res = await Promise.all(Array.from({ length: 3000 }, (_, i) => applyAsync(s, [leased(`tb:lease:g${i}`, 10, 50, 1000, limit)], 0)))
    assert.equal(res.filter((o) => o[0]!.allowed).length, 3000, 'each decided exactly, and allowed')
    // How many are still within their TTL depends on how long the 3,000 calls took; some are.
    assert.ok(s.trackedKeys > 0, 'exact-mode keys are held for their TTL')
    await waitFor(() => s.trackedKeys === 0, 'every key forgotten once its 1 s passed')
  })

  it('reset (the admin API) deletes the remote counter; a slice leased before it lapses as usual', async () => {
    const s = await open()
    const limit = leased('x', 100, 20, 100).limit as BucketLimit
    await applyAsync(s, [leased('tb:lease:h', 100, 20, 100, limit)], 0)
    assert.ok(Math.abs(tokens('tb:lease:h') - 80) < 0.1, 'the slice is taken')
    await new Promise<void>((resolve, reject) => s.reset!(['tb:lease:h'], (err) => (err ? reject(err) : resolve())))
    assert.ok(Number.isNaN(tokens('tb:lease:h')), 'the counter is gone from Redis')
    // The lapsed slice gives its 19 tokens back to a fresh (absent, so full) bucket: nothing to add.
    await waitFor(() => s.trackedKeys === 0, 'the slice lapsed')
    assert.ok(Number.isNaN(tokens('tb:lease:h')) || tokens('tb:lease:h') <= 100, 'never past burst')
  })
})
