// Redis-only behaviour beyond the contract, on a redis-server this file owns:
// server clock, time never backwards, TTL, NOSCRIPT after SCRIPT FLUSH,
// deadlines, outages without queueing, recovery, health, Unix socket.
import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { after, before, describe, it } from 'node:test'
import { StoreError } from '../../src/errors.js'
import { RedisStore } from '../../src/store/redis/store.js'
import { redisScripts } from '../../src/store/redis/script.js'
import { parseRedisUrl } from '../../src/store/redis/url.js'
import { readBucket, sleep, startRedis, WRITE_BUCKET_LUA, type RedisServer } from '../helpers/redis-servers.js'
import { runQueueMs } from '../helpers/run-queue.js'
import { applyAsync, tbCheck, storeHealth } from '../helpers/store.js'
import { waitFor } from '../helpers/wait.js'

const tb = tbCheck

describe('redis store behaviour', () => {
  let server: RedisServer
  let store: RedisStore
  before(async () => {
    server = await startRedis()
    store = new RedisStore({ target: parseRedisUrl(server.url), timeoutMs: 50 })
    assert.equal(await store.ready(3000), true)
  })
  after(async () => {
    await store?.close()
    await server?.stop()
  })
  /** A bucket as stored: two packed doubles, tokens and last µs. */
  const bucket = (key: string): { tokens: number; last: number } => {
    const b = readBucket((...a) => server.cli(...a), key)
    assert.ok(b, `bucket ${key} exists`)
    return b
  }

  it('uses the server clock: the `now` argument changes nothing', async () => {
    const a = await applyAsync(store, [tb('tb:clock:a', 10, 1)], 0)
    const b = await applyAsync(store, [tb('tb:clock:a', 10, 1)], 1e12)
    const c = await applyAsync(store, [tb('tb:clock:a', 10, 1)], -5)
    assert.deepEqual([a[0]!.value, Math.floor(b[0]!.value), Math.floor(c[0]!.value)], [9, 8, 7])
  })

  it('never moves a bucket time backwards (a last time in the future stays)', async () => {
    const future = (Math.floor(Date.now() / 1000) + 100) * 1e6 // server time in whole microseconds
    server.cli('eval', WRITE_BUCKET_LUA, '1', 'tb:clock:future', '0', String(future), '300000')
    const [o] = await applyAsync(store, [tb('tb:clock:future', 10, 1)], 0)
    assert.equal(o!.allowed, false)
    assert.equal(o!.value, 0, 'no refill for negative elapsed time')
    assert.equal(bucket('tb:clock:future').last, future)
  })

  it('stores two packed doubles (16 bytes) with a PX of the time until full', async () => {
    // The PX is set when the call runs and counts down from there: by the time PTTL is read it is
    // short of it by at most the time from the call's start to the read's end (+1 for ms rounding).
    let t0 = performance.now()
    await applyAsync(store, [tb('tb:ttl:half', 100, 10, 50)], 0) // 50 missing at 10/s → 5 s
    const pttl = Number(server.cli('pttl', 'tb:ttl:half'))
    let since = performance.now() - t0
    assert.ok(pttl >= 5000 - since - 1 && pttl <= 5000, `pttl ${pttl}, read ${since.toFixed(1)} ms after the call began`)
    assert.equal(bucket('tb:ttl:half').tokens, 50)
    assert.equal(server.cli('strlen', 'tb:ttl:half'), '16')
    assert.ok(Number.isInteger(bucket('tb:ttl:half').last) && bucket('tb:ttl:half').last > 1.7e15, 'last: whole µs of server time')
    t0 = performance.now()
    await applyAsync(store, [tb('tb:ttl:min', 100, 1000, 1)], 0) // full after 1 ms → at least 1 s
    const min = Number(server.cli('pttl', 'tb:ttl:min'))
    since = performance.now() - t0
    assert.ok(min >= 1000 - since - 1 && min <= 1000, `pttl ${min}, read ${since.toFixed(1)} ms after the call began`)
  })

  it('sends one command per request (EVALSHA) once the script is cached', async () => {
    await applyAsync(store, [tb('tb:cmd:x', 10, 1)], 0)
    server.cli('config', 'resetstat')
    for (let i = 0; i < 20; i++) await applyAsync(store, [tb('tb:cmd:x', 1000, 1), tb('tb:cmd:y', 1000, 1)], 0)
    const stats = server.cli('info', 'commandstats')
    const calls = (name: string): number => Number(new RegExp(`cmdstat_${name}:calls=(\\d+)`).exec(stats)?.[1] ?? 0)
    assert.equal(calls('evalsha') + calls('eval'), 20, stats)
  })

  it('a reply that came in while this process was busy past the deadline is an answer, not a timeout', async () => {
    const call = Promise.resolve(applyAsync(store, [tb('tb:busy:x', 10, 1)], 0))
    await new Promise((r) => setImmediate(r)) // the batch is sent (its flush was queued first)
    // Busy (the loop does not turn) until Redis has run the call, whose reply then sits unread in
    // the socket, and the 45 ms deadline timer is overdue: the next turn runs timers before I/O.
    const t0 = performance.now()
    while (readBucket((...a) => server.cli(...a), 'tb:busy:x') === undefined || performance.now() - t0 < 100) {
      // spawnSync: synchronous, the event loop stays blocked
    }
    const [o] = await call
    assert.equal(o!.allowed, true)
    assert.equal(o!.value, 9)
  })

  it('a SCRIPT FLUSH is invisible to callers (NOSCRIPT → EVAL, script re-cached)', async () => {
    server.cli('script', 'flush')
    const results = await Promise.all(Array.from({ length: 20 }, () => applyAsync(store, [tb('tb:flush:x', 1000, 1)], 0)))
    assert.ok(results.every((r) => r[0]!.allowed))
    const [o] = await applyAsync(store, [tb('tb:flush:x', 1000, 1)], 0)
    assert.ok(Math.abs(o!.value - 979) < 0.5, `every call charged exactly once: ${o!.value}`)
    assert.equal(
      server.cli('script', 'exists', createHash('sha1').update(redisScripts().take).digest('hex')),
      '1',
      'the script is cached again',
    )
  })

  it('a hung Redis: each call fails with FV_STORE_TIMEOUT at the deadline, health degrades', async () => {
    server.proc.kill('SIGSTOP')
    try {
      const t0 = performance.now()
      const waited0 = runQueueMs()
      const errs = await Promise.all(
        Array.from({ length: 10 }, () =>
          Promise.resolve(applyAsync(store, [tb('tb:hang:x', 10, 1)], 0)).then(
            () => undefined,
            (e: unknown) => e,
          ),
        ),
      )
      const took = performance.now() - t0
      const waited = runQueueMs() - waited0
      for (const e of errs) {
        assert.ok(e instanceof StoreError, String(e))
        assert.equal(e.code, 'FV_STORE_TIMEOUT')
      }
      // Less the time this process was ready to run and had no CPU (a loaded machine's, not the store's).
      assert.ok(took - waited < 50 + 40, `deadline 50 ms, took ${took.toFixed(1)} ms (${waited.toFixed(1)} of it waiting for a CPU)`)
      assert.equal(storeHealth(store, 'open').state, 'degraded')
      assert.equal(storeHealth(store, 'open').ready, true, 'fail-open: still ready')
    } finally {
      server.proc.kill('SIGCONT')
    }
    await applyAsync(store, [tb('tb:hang:y', 10, 1)], 0)
    assert.equal(storeHealth(store, 'open').state, 'ok')
  })

  it('one batch in flight: calls held behind a hung batch fail at their own deadline, then run once Redis resumes', async () => {
    await applyAsync(store, [tb('tb:held:x', 1000, 1)], 0) // bucket exists, script cached
    server.cli('config', 'resetstat')
    server.proc.kill('SIGSTOP')
    let firstErrs: unknown[] = []
    let heldErrs: unknown[] = []
    let heldTook = 0
    let heldWaited = 0
    try {
      const first = Array.from({ length: 5 }, () =>
        Promise.resolve(applyAsync(store, [tb('tb:held:x', 1000, 1)], 0)).then(
          () => undefined,
          (e: unknown) => e,
        ),
      )
      await new Promise((r) => setImmediate(r)) // the first batch is written (its flush was queued first) and unanswered
      const t0 = performance.now()
      const waited0 = runQueueMs()
      const held = Array.from({ length: 7 }, () =>
        Promise.resolve(applyAsync(store, [tb('tb:held:x', 1000, 1)], 0)).then(
          () => undefined,
          (e: unknown) => e,
        ),
      )
      firstErrs = await Promise.all(first)
      heldErrs = await Promise.all(held)
      heldTook = performance.now() - t0
      heldWaited = runQueueMs() - waited0
    } finally {
      server.proc.kill('SIGCONT')
    }
    for (const e of [...firstErrs, ...heldErrs]) assert.equal((e as StoreError).code, 'FV_STORE_TIMEOUT', String(e))
    // Their own deadline (45 ms timer), not the hung batch's plus theirs.
    assert.ok(
      heldTook >= 40 && heldTook - heldWaited < 50 + 40,
      `held calls failed at their own deadline: ${heldTook.toFixed(1)} ms (${heldWaited.toFixed(1)} of it waiting for a CPU)`,
    )
    // Sent on the same connection after the two batches, so Redis runs it after them.
    const [o] = await applyAsync(store, [tb('tb:held:x', 1000, 1)], 0)
    const stats = server.cli('info', 'commandstats')
    const sent = Number(/cmdstat_evalsha:calls=(\d+)/.exec(stats)?.[1] ?? 0)
    // The held batch left when the hung one expired; both ran whole once Redis resumed, then the last call.
    assert.equal(sent, 5 + 7 + 1, stats)
    assert.ok(Math.abs(o!.value - (999 - 13)) < 0.5, `tokens ${o!.value}`)
  })

  it('a dead Redis: calls fail at once (nothing queues), recovery is automatic', async () => {
    const closed = new RedisStore({ target: parseRedisUrl(server.url), timeoutMs: 50 })
    assert.equal(await closed.ready(3000), true)
    try {
      await server.kill()
      await waitFor(() => storeHealth(store, 'open').state !== 'ok', 'the store sees the connection gone')
      const t0 = performance.now()
      const waited0 = runQueueMs()
      for (let i = 0; i < 50; i++) {
        // Refused for the missing connection, not left to reach the deadline.
        await assert.rejects(
          Promise.resolve(applyAsync(store, [tb('tb:dead:x', 10, 1)], 0)),
          (e: unknown) => e instanceof StoreError && e.code !== 'FV_STORE_TIMEOUT',
        )
      }
      const waited = runQueueMs() - waited0
      const each = (performance.now() - t0 - waited) / 50
      assert.ok(each < 5, `a call while down took ${each.toFixed(2)} ms on average (besides ${waited.toFixed(1)} ms waiting for a CPU)`)
      assert.deepEqual(storeHealth(store, 'open'), { state: 'degraded', ready: true }, 'fail-open: serving, but without limits')
      assert.deepEqual(storeHealth(closed, 'closed'), { state: 'connecting', ready: false })
      await server.restart()
      const t1 = Date.now()
      while (Date.now() - t1 < 2000) {
        try {
          await applyAsync(store, [tb('tb:dead:y', 10, 1)], 0)
          break
        } catch {
          await sleep(20)
        }
      }
      assert.ok(Date.now() - t1 < 2000, 'limiting resumed within 2 s of the restart')
      assert.equal(await closed.ready(2000), true)
      assert.deepEqual(storeHealth(closed, 'closed'), { state: 'ok', ready: true })
      const [o] = await applyAsync(store, [tb('tb:dead:y', 10, 1)], 0)
      assert.equal(Math.round(o!.value), 8, 'state kept counting after the restart (script reloaded)')
    } finally {
      await closed.close()
    }
  })

  it('connects through a Unix socket with a db number', async () => {
    const s = new RedisStore({ target: parseRedisUrl(`unix://${server.unixSocket}?db=3`), timeoutMs: 200 })
    try {
      assert.equal(await s.ready(3000), true)
      await applyAsync(s, [tb('tb:unix:x', 5, 1)], 0)
      assert.equal(readBucket((...a) => server.cli(...a), 'tb:unix:x', '-n', '3')?.tokens, 4)
      assert.equal(server.cli('-n', '0', 'exists', 'tb:unix:x'), '0')
    } finally {
      await s.close()
    }
  })
})
