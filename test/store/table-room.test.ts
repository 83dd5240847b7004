/**
 * Room in the in-process stores. The shared table places keys by SipHash-1-3
 * under a per-table random seed (drawn at creation, kept in the buffer, read
 * by every thread); with a known seed a test can aim, as an attacker without
 * the seed cannot, and fill both buckets of a victim key. A new key may then
 * take only a slot that carries no information (empty or expired); when both
 * buckets hold only live counters (spent buckets, counted windows, an open
 * breaker) the new key's check is refused `full` and nothing is dropped.
 * The single-thread store obeys the same rule over its least recently used
 * counters.
 */
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { describe, it } from 'node:test'
import { meterLimit } from '../../src/algorithms/kinds/rate-meter/kind.js'
import { bucketLimit } from '../../src/algorithms/kinds/token-bucket/kind.js'
import { counterLimit } from '../../src/algorithms/kinds/window-counter/kind.js'
import { ENTRY_OVERHEAD_BYTES, MemoryStore } from '../../src/store/memory/store.js'
import { LeaseTable } from '../../src/store/threads/leases.js'
import { sipHash, sipKey } from '../../src/store/threads/siphash.js'
import { SharedMemoryStore } from '../../src/store/threads/store.js'
import { SharedTable } from '../../src/store/threads/table.js'
import type { Check } from '../../src/store/store.js'
import { tbCheck } from '../helpers/store.js'

const SEED = Uint8Array.from({ length: 16 }, (_, i) => 0xa0 + i)
const NOW = 1_000_000
const WAYS = 16

function where(t: SharedTable, key: string): Int32Array {
  const out = new Int32Array(4)
  t.locate(key, out, 0)
  return out
}

/** `n` keys whose two buckets are the victim's two (a victim with two distinct buckets): they compete for its 32 slots. */
function aimAt(t: SharedTable, victim: string, n: number): string[] {
  const v = where(t, victim)
  assert.notEqual(v[0], v[1], 'pick a victim with two buckets')
  const out: string[] = []
  for (let i = 0; out.length < n; i++) {
    const w = where(t, `tb:junk:${i}`)
    if ((w[0] === v[0] && w[1] === v[1]) || (w[0] === v[1] && w[1] === v[0])) out.push(`tb:junk:${i}`)
  }
  return out
}

/** A spent token bucket (burst 1, one token a day): information until it refills. */
const spent = (key: string, cost = 1): Check => tbCheck(key, 1, 1 / 86_400, cost)

describe('the shared table: keyed placement', () => {
  it('the seed is drawn per table: one key lands elsewhere in two tables, and alike in one table read from another view', () => {
    const a = SharedTable.create(1 << 20)
    const b = SharedTable.create(1 << 20)
    assert.notDeepEqual(new Uint8Array(a.buffer, 48, 16), new Uint8Array(b.buffer, 48, 16))
    assert.notDeepEqual([...where(a, 'tb:per_ip:127.0.0.1')], [...where(b, 'tb:per_ip:127.0.0.1')])
    // Another thread's view of a table (a worker) reads the seed from the buffer: same placement.
    const view = new SharedTable(a.buffer, 3)
    for (let i = 0; i < 100; i++) assert.deepEqual([...where(view, `k${i}`)], [...where(a, `k${i}`)])
  })

  it('with a known seed, placement is SipHash-1-3 of the key as UTF-16LE: buckets from its halves, fingerprint the hash', () => {
    const t = SharedTable.create(1 << 20, SEED)
    const h = new Int32Array(2)
    for (const key of ['tb:per_ip:127.0.0.1', 'é€😀', '']) {
      sipHash(sipKey(SEED), Buffer.from(key, 'utf16le').toString('latin1'), false, 1, 3, h, 0)
      const w = where(t, key)
      assert.deepEqual([w[2], w[3]], [h[0], h[1]])
      assert.equal(w[0], (h[1]! >>> 0) % t.buckets)
      assert.equal(w[1], (h[0]! >>> 0) % t.buckets)
    }
  })

  // Simulated for 339 buckets of 16: the first refusal comes at 86-90 % of the slots with two choices, 38-43 % with one.
  it('buckets fill evenly: 80 % of the slots taken by random keys before the first refusal (two choices)', () => {
    const t = SharedTable.create(256 * 1024)
    const store = new SharedMemoryStore({ table: t })
    let i = 0
    while (store.applyNow([spent(`tb:r:${randomBytes(8).toString('hex')}`)], NOW)[0]!.allowed) i++
    assert.ok(i >= 0.8 * t.slots, `${i} keys of ${t.slots} slots before the first refusal`)
  })

  it('the lease table draws its own seed and shares it with every view of its buffer', () => {
    const a = LeaseTable.create(64)
    const b = LeaseTable.create(64)
    assert.notDeepEqual(new Uint8Array(a.buffer, 8, 16), new Uint8Array(b.buffer, 8, 16))
    const lim = bucketLimit(1, 100)
    const cfg = { tokens: 10, ttlMs: 60_000 }
    const other = new LeaseTable(a.buffer, 5)
    assert.equal(a.take('tb:k', lim, cfg, 1, 0), 2 /* FETCH */)
    assert.equal(other.fetching('tb:k'), 0, 'the other view finds the key in the same cell')
  })
})

describe('the shared table: room only from counters without information', () => {
  it('both buckets full of spent counters: the victim key is refused (full, counted, Retry-After = first expiry), nothing dropped', () => {
    const t = SharedTable.create(64 * 1024, SEED)
    let reported = 0
    const store = new SharedMemoryStore({ table: t, onFull: () => reported++ })
    const victim = 'tb:victim:1'
    const fillers = aimAt(t, victim, 2 * WAYS)
    // Every kind of information: spent buckets, a partly spent one, a counted window, an open breaker.
    const states: Check[] = fillers.map((k, i) =>
      i === 0
        ? { key: k, limit: counterLimit(10, 3600, 0), cost: 1, shadow: false }
        : i === 1
          ? { key: k, limit: meterLimit(1, 600), cost: 5, shadow: false }
          : i === 2
            ? tbCheck(k, 10, 1 / 60, 1)
            : spent(k),
    )
    for (const c of states) store.applyNow([c], NOW + (c === states[3] ? 0.5 : 0))
    assert.equal(t.used, 2 * WAYS)
    const [o] = store.applyNow([spent(victim)], NOW + 1)
    assert.deepEqual(
      o,
      { allowed: false, value: 0, retryAfter: 59, full: true },
      'the partly spent bucket refills first, 60 s after its request',
    )
    assert.equal(t.full, 1)
    assert.equal(reported, 1)
    // Every filler still holds what it held.
    assert.equal(store.applyNow([{ ...states[0]!, cost: 0 }], NOW + 2)[0]!.value, 1)
    assert.equal(store.applyNow([states[1]!], NOW + 2)[0]!.allowed, false, 'the breaker is still open')
    for (const c of states.slice(3)) assert.equal(store.applyNow([c], NOW + 2)[0]!.allowed, false, c.key)
    assert.equal(t.used, 2 * WAYS, 'the refused key took no slot')
  })

  it('an information-free counter goes first: the victim takes the slot of the one that refilled, every spent one stays', () => {
    const t = SharedTable.create(64 * 1024, SEED)
    const store = new SharedMemoryStore({ table: t })
    const victim = 'tb:victim:2'
    const fillers = aimAt(t, victim, 2 * WAYS)
    for (const k of fillers.slice(1)) store.applyNow([spent(k)], NOW)
    store.applyNow([tbCheck(fillers[0]!, 1, 1, 1)], NOW) // full again 1 s later
    assert.equal(store.applyNow([spent(victim)], NOW + 0.5)[0]!.full, true, 'before it refills: no room')
    assert.equal(store.applyNow([spent(victim)], NOW + 2)[0]!.allowed, true, 'after: its slot is taken')
    assert.equal(store.has(fillers[0]!, -Infinity), false, 'the refilled counter was the one replaced')
    for (const k of fillers.slice(1)) assert.equal(store.applyNow([spent(k)], NOW + 2)[0]!.allowed, false, k)
    assert.equal(store.applyNow([spent(victim)], NOW + 3)[0]!.allowed, false, 'the victim is counted from now on')
  })

  it('a request is all or nothing: when its second key has no room, its first key is not charged and its claimed slot is freed', () => {
    const t = SharedTable.create(64 * 1024, SEED)
    const store = new SharedMemoryStore({ table: t })
    const victim = 'tb:victim:3'
    for (const k of aimAt(t, victim, 2 * WAYS)) store.applyNow([spent(k)], NOW)
    const used = t.used
    const out = store.applyNow([tbCheck('tb:first:x', 5, 1, 1), spent(victim)], NOW)
    assert.equal(out[0]!.allowed, true)
    assert.equal(out[1]!.full, true)
    assert.equal(t.used, used, 'the slot claimed for the first key was given back')
    assert.equal(store.has('tb:first:x', -Infinity), false)
    // A shadow check without room refuses its own group only.
    const mixed = store.applyNow([tbCheck('tb:enforced:x', 5, 1, 1), { ...spent(victim), shadow: true }], NOW)
    assert.equal(mixed[0]!.allowed, true)
    assert.equal(mixed[1]!.full, true)
    assert.equal(store.applyNow([tbCheck('tb:enforced:x', 5, 1, 0)], NOW)[0]!.value, 4, 'the enforce group was committed')
  })

  it("a key's own expired counter is not taken by another key of the same request: it is charged, the other refused", () => {
    const t = SharedTable.create(64 * 1024, SEED)
    const store = new SharedMemoryStore({ table: t })
    const victim = 'tb:victim:5'
    const [own, ...fillers] = aimAt(t, victim, 2 * WAYS)
    for (const k of fillers) store.applyNow([spent(k)], NOW)
    store.applyNow([tbCheck(own!, 5, 1, 5)], NOW) // full again 5 s later
    const out = store.applyNow([tbCheck(own!, 5, 1, 1), { ...spent(victim), shadow: true }], NOW + 10)
    assert.equal(out[0]!.allowed, true)
    assert.equal(out[1]!.full, true, "its slot was the only room, and it is its key's")
    assert.equal(store.applyNow([tbCheck(own!, 5, 1, 0)], NOW + 10)[0]!.value, 4, 'charged')
  })

  it('an adjustment of a key with no room is dropped, never made room for', () => {
    const t = SharedTable.create(64 * 1024, SEED)
    const store = new SharedMemoryStore({ table: t })
    const victim = 'tb:victim:4'
    const fillers = aimAt(t, victim, 2 * WAYS)
    for (const k of fillers) store.applyNow([spent(k)], NOW)
    store.adjust([{ key: victim, limit: spent(victim).limit, amount: -1 }], NOW, () => {})
    assert.equal(store.has(victim, NOW), false)
    assert.equal(t.full, 1)
    for (const k of fillers) assert.equal(store.has(k, NOW), true)
  })
})

describe('the memory store: room only from counters without information', () => {
  const bound = (n: number, key: string): number => n * (ENTRY_OVERHEAD_BYTES + key.length)

  it('full of spent counters: a new key is refused (full, counted), none is dropped; an expired one makes room', () => {
    let reported = 0
    const store = new MemoryStore({ maxBytes: bound(100, 'tb:m:000'), onFull: () => reported++ })
    for (let i = 0; i < 99; i++) store.applyNow([spent(`tb:m:${String(i).padStart(3, '0')}`)], NOW)
    store.applyNow([tbCheck('tb:m:999', 1, 1, 1)], NOW) // the most recently used: full again 1 s later
    assert.equal(store.size, 100)
    const [o] = store.applyNow([spent('tb:m:new')], NOW + 0.5)
    assert.deepEqual(o, { allowed: false, value: 0, retryAfter: 86_400, full: true })
    assert.equal(store.full, 1)
    assert.equal(reported, 1)
    for (let i = 0; i < 99; i++) assert.equal(store.applyNow([spent(`tb:m:${String(i).padStart(3, '0')}`)], NOW + 1)[0]!.allowed, false)
    // The refilled counter sits behind more than 16 live ones: each refusal looks at the next 16.
    let tries = 0
    while (!store.applyNow([spent('tb:m:new')], NOW + 2)[0]!.allowed) assert.ok(++tries <= 100 / 16 + 1, `${tries} tries`)
    assert.equal(store.size, 100)
    assert.equal(store.applyNow([tbCheck('tb:m:999', 1, 1, 0)], NOW + 2)[0]!.value, 1, 'the refilled one was replaced')
    for (let i = 0; i < 99; i++) assert.equal(store.applyNow([spent(`tb:m:${String(i).padStart(3, '0')}`)], NOW + 2)[0]!.allowed, false)
  })

  it('a group is all or nothing: a second key without room leaves no trace of the first', () => {
    // Room for 10 counters and one more new key.
    const store = new MemoryStore({ maxBytes: bound(10, 'tb:m:0') + bound(1, 'tb:new:x') })
    for (let i = 0; i < 10; i++) store.applyNow([spent(`tb:m:${i}`)], NOW)
    const bytes = store.bytesUsed
    const out = store.applyNow([tbCheck('tb:m:0', 1, 1, 0), tbCheck('tb:new:x', 5, 1, 1), spent('tb:new:y')], NOW)
    assert.equal(out[1]?.allowed, true)
    assert.equal(out[2]?.full, true)
    assert.equal(store.size, 10)
    assert.equal(store.bytesUsed, bytes)
    assert.equal(store.applyNow([tbCheck('tb:new:x', 5, 1, 1)], NOW)[0]!.value, 4, 'its first request was not charged')
  })

  it("a key's own expired counter is not taken by another key of the same request", () => {
    const store = new MemoryStore({ maxBytes: bound(10, 'tb:m:0') })
    store.applyNow([tbCheck('tb:m:0', 5, 1, 5)], NOW) // the least recently used, full again 5 s later
    for (let i = 1; i < 10; i++) store.applyNow([spent(`tb:m:${i}`)], NOW)
    const out = store.applyNow([tbCheck('tb:m:0', 5, 1, 1), { ...spent('tb:m:x'), shadow: true }], NOW + 10)
    assert.equal(out[0]!.allowed, true)
    assert.equal(out[1]!.full, true)
    assert.equal(store.applyNow([tbCheck('tb:m:0', 5, 1, 0)], NOW + 10)[0]!.value, 4, 'charged')
  })

  it('keys longer than V8 hashes (16,383 characters) do not collide in its Map: 4,000 of them in seconds', () => {
    const store = new MemoryStore({ maxBytes: 64 << 20 })
    const pad = 'x'.repeat(17_000)
    const t0 = process.hrtime.bigint()
    for (let i = 0; i < 4000; i++) store.applyNow([spent(`tb:long:${pad}${String(i).padStart(6, '0')}`)], NOW)
    const s = Number(process.hrtime.bigint() - t0) / 1e9
    assert.equal(store.size, 4000)
    assert.ok(s < 4, `${s.toFixed(1)} s`)
    assert.equal(store.applyNow([spent(`tb:long:${pad}000007`)], NOW)[0]!.allowed, false, 'each long key keeps its own counter')
  })
})
