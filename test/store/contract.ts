/**
 * The store contract: every Store implementation must pass these cases with
 * the same results (the memory store is the reference). Stores on a server
 * clock ignore `now`, so time passes by real waits there and refill amounts
 * are checked within the waiting slack; on the memory store time is driven
 * and every figure is exact.
 *
 * The cases that let time pass run last, together: at once on a server's clock
 * (most of their time is a real wait, and each has keys of its own), one after
 * the other on a driven clock (each moves the one clock they share). Not beside
 * the other cases: their bursts of calls would make a measured wait late.
 */
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { after, before, describe, it } from 'node:test'
import type { Adjustment, Check, Outcomes, Store } from '../../src/store/store.js'
import { applyAsync, tbCheck } from '../helpers/store.js'
import { debtCases } from './contract-debt.js'
import { kindCases } from './contract-kinds.js'
import { onRejectCases } from './contract-on-reject.js'
import { slidingDelayCases } from './contract-sliding-delay.js'

export interface ContractOptions {
  /** The store reads its own (server) clock: waits are real. */
  serverClock: boolean
  /** Unique per run (distinct rule names), so runs on a shared server never collide. */
  prefix: string
  /** Whether the bucket `key` is still stored at `now` (after the store's own expiry mechanism ran). */
  keyExists(store: Store, key: string, now: number): Promise<boolean>
  /** Called once after the suite (delete keys, stop servers). */
  cleanup?(): Promise<void>
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms))

export function runStoreContract(name: string, makeStore: () => Promise<Store>, opts: ContractOptions): void {
  describe(`store contract: ${name}`, () => {
    let store: Store
    let t = 1_000_000 // driven clock (seconds) for stores that take `now`
    let n = 0
    const key = (label: string): string => `tb:${opts.prefix}-${label}-${n++}:k`
    const now = (): number => (opts.serverClock ? Date.now() / 1000 : t)
    /** Let `s` seconds pass. */
    const pass = async (s: number): Promise<void> => {
      if (opts.serverClock) await sleep(s * 1000)
      else t += s
    }
    const apply = async (checks: Check[]): Promise<Outcomes> => await applyAsync(store, checks, now())
    const adjustAsync = (adjustments: Adjustment[]): Promise<void> =>
      new Promise((resolve, reject) => store.adjust(adjustments, now(), (err) => (err ? reject(err) : resolve())))
    const tb = tbCheck
    const waiting: [string, () => Promise<void>][] = []
    const waits = (name: string, fn: () => Promise<void>): void => void waiting.push([name, fn])

    before(async () => {
      store = await makeStore()
    })
    after(async () => {
      await store.close()
      await opts.cleanup?.()
    })

    it('a first request sees a full bucket', async () => {
      const [o] = await apply([tb(key('first'), 5, 0.001)])
      assert.deepEqual(o, { allowed: true, value: 4, retryAfter: 0 })
    })

    waits('refills continuously at the rate, capped at burst', async () => {
      const k = key('refill')
      const aSent = now()
      const [a] = await apply([tb(k, 10, 20, 10)])
      const aDone = now()
      assert.equal(a!.allowed, true)
      assert.ok(a!.value < 1e-6, `drained: ${a!.value}`)
      await pass(0.25) // 20/s × 0.25 s = 5 tokens
      const bSent = now()
      const [b] = await apply([tb(k, 10, 20, 1)])
      const bDone = now()
      assert.equal(b!.allowed, true)
      // At least the 0.25 s; at most what our clock saw from the first call's start to the second's end (the
      // store refills by its own clock, between those), to the millisecond of Date.now().
      const most = 20 * (bDone - aSent) - 1 + (opts.serverClock ? 20 * 0.002 : 1e-9)
      const what = `tokens after 0.25 s: ${b!.value} (at most ${most}: ${Math.round((bSent - aDone) * 1000)} ms between the calls)`
      assert.ok(b!.value >= 4 - 1e-9 && b!.value <= most, what)
      const [c] = await apply([tb(k, 10, 20, 10)])
      assert.equal(c!.allowed, false)
      assert.equal(c!.retryAfter, 1) // ceil((10 - ~4) / 20)
      await pass(0.6) // more than enough to fill: capped at burst
      const [d] = await apply([tb(k, 10, 20, 1)])
      assert.deepEqual(d, { allowed: true, value: 9, retryAfter: 0 })
    })

    it('a reject changes nothing and reports the wait for its cost', async () => {
      const k = key('reject')
      await apply([tb(k, 5, 0.001, 3)])
      const [r] = await apply([tb(k, 5, 0.001, 4)])
      assert.equal(r!.allowed, false)
      assert.ok(Math.abs(r!.value - 2) < 0.001, `tokens reported on reject: ${r!.value}`)
      assert.equal(r!.retryAfter, 2000) // ceil((4 - 2) / 0.001)
      const [ok] = await apply([tb(k, 5, 0.001, 2)])
      assert.equal(ok!.allowed, true, 'the rejected cost was not charged')
      assert.ok(ok!.value < 0.001)
    })

    it('all or nothing across keys: a later reject leaves earlier keys uncharged', async () => {
      const a = key('aon-a')
      const b = key('aon-b')
      const first = await apply([tb(a, 5, 0.001), tb(b, 1, 0.001)])
      assert.deepEqual(
        first.map((o) => o?.allowed),
        [true, true],
      )
      const second = await apply([tb(a, 5, 0.001), tb(b, 1, 0.001)])
      assert.equal(second[0]!.allowed, true)
      assert.equal(second[1]!.allowed, false)
      const reversed = await apply([tb(b, 1, 0.001), tb(a, 5, 0.001)])
      assert.equal(reversed[0]!.allowed, false)
      assert.equal(reversed[1], undefined, 'checks after a reject are not evaluated')
      const [alone] = await apply([tb(a, 5, 0.001)])
      assert.ok(Math.abs(alone!.value - 3) < 0.001, `a was charged only by the first and this call: ${alone!.value}`)
    })

    it('the shadow group is independent of the enforce group', async () => {
      const x = key('grp-x')
      const y = key('grp-y')
      const z = key('grp-z')
      await apply([tb(y, 1, 0.001, 1, true)]) // exhaust shadow y
      const mixed = await apply([tb(y, 1, 0.001, 1, true), tb(x, 1, 0.001)])
      assert.equal(mixed[0]!.allowed, false)
      assert.equal(mixed[1]!.allowed, true, 'a shadow reject does not stop enforce checks')
      const again = await apply([tb(x, 1, 0.001), tb(z, 2, 0.001, 1, true)])
      assert.equal(again[0]!.allowed, false)
      assert.equal(again[1]!.allowed, true, 'an enforce reject does not stop shadow checks')
      const [zz] = await apply([tb(z, 2, 0.001, 1, true)])
      assert.ok(zz!.allowed && zz!.value < 0.001, `the shadow check of the rejected request was committed: ${zz!.value}`)
    })

    it('a key repeated in one call sees the state staged by its earlier check', async () => {
      const k = key('dup')
      const one = await apply([tb(k, 5, 0.001, 2), tb(k, 5, 0.001, 2)])
      assert.ok(Math.abs(one[0]!.value - 3) < 0.001 && Math.abs(one[1]!.value - 1) < 0.001, JSON.stringify(one))
      const two = await apply([tb(k, 5, 0.001, 1), tb(k, 5, 0.001, 1)])
      assert.equal(two[0]!.allowed, true)
      assert.equal(two[1]!.allowed, false, 'the second check saw the first one staged')
      const [three] = await apply([tb(k, 5, 0.001, 1)])
      assert.equal(three!.allowed, true, 'nothing of the rejected call was committed')
      assert.ok(three!.value < 0.001)
    })

    it('a cost above burst always rejects and stores nothing', async () => {
      const k = key('over')
      const [r] = await apply([tb(k, 5, 2, 6)])
      assert.equal(r!.allowed, false)
      assert.equal(r!.value, 5)
      assert.equal(r!.retryAfter, 1) // max(1, ceil((6 - 5) / 2))
      const [ok] = await apply([tb(k, 5, 2, 5)])
      assert.deepEqual(ok, { allowed: true, value: 0, retryAfter: 0 })
    })

    it('keys of any length and content are limited exactly, each on its own counter', async () => {
      // Limit keys come from request data: 3.5 KB (above PostgreSQL's index entry limit), a NUL, a long key
      // that differs from another only past its first few hundred characters, and one whose cut falls in a surrogate pair.
      const long = key('long') + randomBytes(2625).toString('base64')
      const twin = long.slice(0, -1) + (long.endsWith('A') ? 'B' : 'A')
      const nul = `${key('nul')}\0x`
      const pair = key('pair') + '\u{1F600}'.repeat(200)
      for (const k of [long, twin, nul, pair]) {
        const results = await Promise.all(Array.from({ length: 5 }, () => apply([tb(k, 3, 0.001)])))
        assert.equal(results.filter(([o]) => o!.allowed).length, 3, `allowed on a key of ${k.length} characters`)
      }
      const [n] = await apply([tb(nul.replace('\0', ''), 3, 0.001)])
      assert.equal(n!.value, 2, 'the key without its NUL is another counter')
    })

    it('never over-grants under concurrency: 200 parallel calls on burst 50 → exactly 50', async () => {
      const k = key('conc')
      const other = key('conc-b')
      const results = await Promise.all(
        Array.from({ length: 200 }, (_, i) =>
          applyAsync(store, i % 2 ? [tb(k, 50, 0.001)] : [tb(other, 1000, 0.001), tb(k, 50, 0.001)], now()),
        ),
      )
      const allowed = results.filter((o) => o[o.length - 1]?.allowed).length
      assert.equal(allowed, 50)
      // The two-key requests that were rejected on k did not charge `other`.
      const twoKeyAllowed = results.filter((o, i) => i % 2 === 0 && o[1]?.allowed).length
      const [b] = await apply([tb(other, 1000, 0.001, 0.5)])
      assert.ok(
        Math.abs(b!.value - (1000 - twoKeyAllowed - 0.5)) < 0.01,
        `other charged ${1000 - b!.value - 0.5}, allowed ${twoKeyAllowed}`,
      )
    })

    waits('an idle bucket disappears once it would be full again', async () => {
      const k = key('ttl')
      await apply([tb(k, 2, 10)]) // full again after 0.1 s; server stores keep it at least 1 s
      assert.equal(await opts.keyExists(store, k, now()), true)
      const keep = key('ttl-keep')
      await apply([tb(keep, 100, 10, 100)]) // full again after 10 s
      await pass(1.3)
      assert.equal(await opts.keyExists(store, k, now()), false)
      assert.equal(await opts.keyExists(store, keep, now()), true)
    })

    it('adjust gives tokens back (never past burst) and charges an overrun (the bucket may go negative)', async () => {
      const k = key('adjust')
      await apply([tb(k, 10, 0.001, 8)]) // 2 left
      await adjustAsync([{ key: k, limit: tb(k, 10, 0.001).limit, amount: 5 }])
      const [a] = await apply([tb(k, 10, 0.001, 1)])
      assert.ok(Math.abs(a!.value - 6) < 0.01, `after a refund of 5: ${a!.value}`)
      await adjustAsync([{ key: k, limit: tb(k, 10, 0.001).limit, amount: 100 }])
      const [b] = await apply([tb(k, 10, 0.001, 1)])
      assert.ok(Math.abs(b!.value - 9) < 0.01, `refund capped at burst: ${b!.value}`)
      await adjustAsync([{ key: k, limit: tb(k, 10, 0.001).limit, amount: -12 }])
      const [c] = await apply([tb(k, 10, 0.001, 1)])
      assert.equal(c!.allowed, false, 'an overrun of 12 leaves the bucket below zero')
      assert.ok(Math.abs(c!.value + 3) < 0.01, `tokens after the overrun: ${c!.value}`)
      const absent = key('adjust-absent')
      await adjustAsync([{ key: absent, limit: tb(absent, 10, 0.001).limit, amount: 3 }])
      assert.equal(await opts.keyExists(store, absent, now()), false, 'nothing to give back to a full (absent) bucket')
    })

    const reset = (keys: string[]): Promise<void> =>
      new Promise((resolve, reject) => store.reset!(keys, (err) => (err ? reject(err) : resolve())))

    it('reset (the admin API) forgets the keys named: their next checks start afresh, other keys keep their counters', async () => {
      assert.equal(typeof store.reset, 'function', 'every store can reset')
      const [a, b, other] = [key('reset-a'), key('reset-b'), key('reset-other')]
      for (const k of [a, b, other]) assert.equal((await apply([tb(k, 2, 0.001, 2)]))[0]!.allowed, true)
      for (const k of [a, b, other]) assert.equal((await apply([tb(k, 2, 0.001)]))[0]!.allowed, false, 'drained')
      await reset([a, b, key('reset-never-seen')])
      assert.equal(await opts.keyExists(store, a, now()), false)
      assert.deepEqual(await apply([tb(a, 2, 0.001)]), [{ allowed: true, value: 1, retryAfter: 0 }])
      assert.deepEqual(await apply([tb(b, 2, 0.001)]), [{ allowed: true, value: 1, retryAfter: 0 }])
      assert.equal((await apply([tb(other, 2, 0.001)]))[0]!.allowed, false, 'a key not named keeps its counter')
      await reset([])
    })

    it('peek (in-process stores) reads a counter without charging it or writing anything', async (t) => {
      if (store.peek === undefined) return t.skip('a remote store is read with a check of cost 0')
      const k = key('peek')
      assert.deepEqual(store.peek(tb(k, 5, 0.001, 3), now()), { allowed: true, value: 5, retryAfter: 0 }, 'an unseen key reads full')
      assert.equal(await opts.keyExists(store, k, now()), false, 'and is not written')
      await apply([tb(k, 5, 0.001, 3)])
      for (let i = 0; i < 2; i++) assert.ok(Math.abs(store.peek(tb(k, 5, 0.001, 3), now()).value - 2) < 1e-6, 'peeking charges nothing')
      assert.equal((await apply([tb(k, 5, 0.001, 2)]))[0]!.allowed, true)
    })

    const context = { store: () => store, serverClock: opts.serverClock, now, key, apply, adjust: adjustAsync, pass, waits }
    describe('sliding window with a delay', () => slidingDelayCases(context))
    describe('token bucket with debt', () => debtCases(context))
    describe('other limit kinds', () => kindCases(context))
    describe('a rejected group read back (onReject)', () => onRejectCases({ store: () => store, key, now }))
    describe('cases that let time pass', { concurrency: opts.serverClock }, () => {
      for (const [name, fn] of waiting) it(name, fn)
    })
  })
}
