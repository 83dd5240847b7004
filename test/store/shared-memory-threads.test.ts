// The shared-memory store across real threads: exact counts under contention, and a thread that dies holding a lock.
import assert from 'node:assert/strict'
import { once } from 'node:events'
import { resolve } from 'node:path'
import { describe, it } from 'node:test'
import { pathToFileURL } from 'node:url'
import { Worker } from 'node:worker_threads'
import { SharedMemoryStore } from '../../src/store/threads/store.js'
import { SharedTable } from '../../src/store/threads/table.js'
import { tbCheck } from '../helpers/store.js'

const dist = (p: string): string => pathToFileURL(resolve('dist', p)).href
// Each thread runs `rounds` calls of [a counter of its own, the shared bucket, the shared window counter] and reports what it was granted.
const HAMMER = `
const { workerData, parentPort, threadId } = require('node:worker_threads')
;(async () => {
  const { SharedTable } = await import(${JSON.stringify(dist('store/threads/table.js'))})
  const { SharedMemoryStore } = await import(${JSON.stringify(dist('store/threads/store.js'))})
  const { bucketLimit } = await import(${JSON.stringify(dist('algorithms/kinds/token-bucket/kind.js'))})
  const { counterLimit } = await import(${JSON.stringify(dist('algorithms/kinds/window-counter/kind.js'))})
  const store = new SharedMemoryStore({ table: new SharedTable(workerData.buffer, threadId) })
  const own = bucketLimit(0.000001, 1e9), shared = bucketLimit(0.000001, workerData.burst), wc = counterLimit(workerData.burst, 600, -1)
  let bucket = 0, counter = 0
  for (let i = 0; i < workerData.rounds; i++) {
    const checks = i % 2
      ? [{ key: 'own:' + threadId, limit: own, cost: 1, shadow: false }, { key: 'tb:shared', limit: shared, cost: 1, shadow: false }]
      : [{ key: 'wc:shared', limit: wc, cost: 1, shadow: false }, { key: 'own:' + threadId, limit: own, cost: 1, shadow: false }]
    const out = store.applyNow(checks, 1000)
    if (i % 2 && out[1] && out[1].allowed) bucket++
    if (!(i % 2) && out[0].allowed) counter++
  }
  parentPort.postMessage({ bucket, counter, own: store.applyNow([{ key: 'own:' + threadId, limit: own, cost: 0, shadow: false }], 1000)[0].value })
})()
`

describe('shared-memory store across threads', () => {
  it('4 threads × 20 000 calls on one bucket and one window counter of 5 000: exactly 5 000 of each granted, no lost update', async () => {
    const table = SharedTable.create(4 * 1024 * 1024)
    const rounds = 20_000
    const workers = Array.from(
      { length: 4 },
      () => new Worker(HAMMER, { eval: true, workerData: { buffer: table.buffer, burst: 5000, rounds } }),
    )
    const results = (await Promise.all(workers.map(async (w) => (await once(w, 'message'))[0]))) as {
      bucket: number
      counter: number
      own: number
    }[]
    await Promise.all(workers.map((w) => w.terminate()))
    assert.equal(
      results.reduce((a, r) => a + r.bucket, 0),
      5000,
    )
    assert.equal(
      results.reduce((a, r) => a + r.counter, 0),
      5000,
    )
    // A thread's own bucket was charged exactly when its group was granted (nothing for a rejected group).
    for (const r of results) assert.equal(1e9 - r.own, r.bucket + r.counter)
  })

  it("every thread of a table places keys alike (the seed is in the buffer), and another table's seed differs", async () => {
    const table = SharedTable.create(1 << 20)
    const keys = Array.from({ length: 200 }, (_, i) => `tb:per_user:u${i}`)
    const place = (t: SharedTable): number[] =>
      keys.flatMap((k) => {
        const out = new Int32Array(4)
        t.locate(k, out, 0)
        return [...out]
      })
    const w = new Worker(
      `
      const { workerData, parentPort, threadId } = require('node:worker_threads')
      ;(async () => {
        const { SharedTable } = await import(${JSON.stringify(dist('store/threads/table.js'))})
        const t = new SharedTable(workerData.buffer, threadId)
        parentPort.postMessage(workerData.keys.flatMap((k) => { const out = new Int32Array(4); t.locate(k, out, 0); return [...out] }))
      })()`,
      { eval: true, workerData: { buffer: table.buffer, keys } },
    )
    const [fromThread] = (await once(w, 'message')) as [number[]]
    await w.terminate()
    assert.deepEqual(fromThread, place(table))
    assert.notDeepEqual(place(SharedTable.create(1 << 20)), place(table))
  })

  it('a thread that dies holding a bucket lock: its locks are released for the others, the stored counters stay', async () => {
    const table = SharedTable.create(2 * 1024 * 1024)
    const store = new SharedMemoryStore({ table })
    store.applyNow([tbCheck('tb:kept', 10, 0.001, 3)], 1000)
    const k = tbCheck('tb:kept', 10, 0.001, 1)
    const stuck = new Worker(
      `
      const { workerData, parentPort, threadId } = require('node:worker_threads')
      ;(async () => {
        const { SharedTable } = await import(${JSON.stringify(dist('store/threads/table.js'))})
        const t = new SharedTable(workerData.buffer, threadId)
        const loc = new Int32Array(4)
        t.locate('tb:kept', loc, 0)
        // Both candidate buckets of the key, ascending, as the store takes them.
        const buckets = [...new Set([loc[0], loc[1]])].sort((a, b) => a - b)
        for (const b of buckets) t.lock(b)
        parentPort.postMessage(buckets.length)
        for (;;) {}
      })()`,
      { eval: true, workerData: { buffer: table.buffer } },
    )
    const [locked] = (await once(stuck, 'message')) as [number]
    const id = stuck.threadId
    await stuck.terminate()
    assert.equal(table.releaseLocksOf(id), locked)
    const [o] = store.applyNow([k], 1000)
    assert.deepEqual(o, { allowed: true, value: 6, retryAfter: 0 })
  })

  it('a flood of 4× as many keys as slots: every slot used, the rest refused and counted, nothing dropped; the sweep empties expired slots', () => {
    const table = SharedTable.create(64 * 1024) // few buckets
    let seen = 0
    const store = new SharedMemoryStore({ table, onFull: () => seen++ })
    const n = table.slots * 4
    let granted = 0
    for (let i = 0; i < n; i++) if (store.applyNow([tbCheck(`tb:flood:${i}`, 10, 1, 1)], 1000)[0]!.allowed) granted++
    // Two choices per key: the table fills to its last slot before any key is refused.
    assert.equal(granted, table.slots)
    assert.equal(table.full, n - table.slots)
    assert.equal(seen, table.full)
    assert.equal(table.used, table.slots)
    assert.equal(store.fill().bytesUsed, table.slots * 48)
    assert.ok(store.fill().bytesUsed <= store.fill().maxBytes)
    // Every granted key still holds its spent token (a cost-0 look stores nothing).
    let spent = 0
    for (let i = 0; i < n; i++) if (store.applyNow([tbCheck(`tb:flood:${i}`, 10, 1, 0)], 1000)[0]!.value === 9) spent++
    assert.equal(spent, table.slots)
    table.sweep(1000 + 2, table.buckets) // every bucket is full again after 1 s
    assert.equal(table.used, 0)
    assert.equal(table.expired, table.slots)
  })
})
