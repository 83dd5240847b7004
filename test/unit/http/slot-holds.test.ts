/**
 * SlotHolds (http/slot-holds.ts) on a real memory store and real streams as
 * the exchanges: a slot is given back once when its exchange closes (at once
 * for one already closed, or for a rejected request), renewed while it lasts
 * so it outlives its lease, a give-back asked for while a renewal is out waits
 * for it, and a give-back the store fails is counted and reported.
 */
import assert from 'node:assert/strict'
import { once } from 'node:events'
import { PassThrough } from 'node:stream'
import { describe, it } from 'node:test'
import { concurrencyLimit } from '../../../src/algorithms/kinds/concurrency/kind.js'
import type { Decision } from '../../../src/engine/decision.js'
import { SlotHolds } from '../../../src/http/slot-holds.js'
import { MemoryStore } from '../../../src/store/memory/store.js'
import type { Adjustment, ApplyDone, Check, Outcomes, Store, StoreState } from '../../../src/store/store.js'
import { waitFor } from '../../helpers/wait.js'

/** A real store whose adjust answers only when told (a remote store's round trip), or fails when `failing`. */
class SlowStore implements Store {
  readonly kind = 'memory'
  readonly pending: (() => void)[] = []
  failing = false
  constructor(readonly inner: MemoryStore) {}
  apply(checks: readonly Check[], now: number, done: ApplyDone): void {
    this.inner.apply(checks, now, done)
  }
  adjust(a: readonly Adjustment[], now: number, done: (err: Error | null) => void): void {
    if (this.failing) return done(new Error('store down'))
    this.pending.push(() => this.inner.adjust(a, now, done))
  }
  /** Answers the oldest adjust. */
  answer(): void {
    this.pending.shift()!()
  }
  state(): StoreState {
    return 'ok'
  }
  ready(): Promise<boolean> {
    return Promise.resolve(true)
  }
  close(): Promise<void> {
    return this.inner.close()
  }
}

const KEY = 'cc:r:acme'

/** Takes a slot of KEY (one of `max`) now; the decision that holds it. */
function take(store: MemoryStore, leaseS: number, allowed = true, max = 1): Decision {
  const limit = concurrencyLimit(max, leaseS)
  const at = Date.now() / 1000
  assert.equal(store.applyNow([{ key: KEY, limit, cost: 1, shadow: false }], at)[0]!.allowed, true)
  return {
    allowed,
    status: allowed ? 200 : 429,
    reason: allowed ? 'all_rules_passed' : 'token_bucket_exceeded',
    mode: 'enforce',
    matchedPolicies: ['p'],
    held: [{ policyId: 'p', key: KEY, limit, amount: 1, at, renewS: leaseS / 3 }],
  }
}

const free = (store: MemoryStore, leaseS: number): boolean =>
  (store.applyNow([{ key: KEY, limit: concurrencyLimit(1, leaseS), cost: 0, shadow: false }], Date.now() / 1000)[0] as Outcomes[0])!
    .value === 1

describe('SlotHolds', () => {
  it('holds a slot until its exchange closes, then gives it back once', async () => {
    const store = new MemoryStore({ maxBytes: 1 << 20 })
    const holds = new SlotHolds(store, Date.now)
    const end = new PassThrough()
    holds.holdUntilClosed(take(store, 300), end)
    assert.deepEqual([holds.holding, holds.inFlight.get('p'), free(store, 300)], [1, 1, false])
    end.destroy()
    await waitFor(() => holds.released === 1, 'given back')
    assert.deepEqual([holds.holding, holds.inFlight.get('p'), free(store, 300)], [0, 0, true])
    end.emit('close')
    assert.equal(holds.released, 1, 'once')
  })

  it('gives back at once for an exchange already closed, and for a rejected request', async () => {
    const store = new MemoryStore({ maxBytes: 1 << 20 })
    const holds = new SlotHolds(store, Date.now)
    const closed = new PassThrough()
    closed.destroy()
    await waitFor(() => closed.closed, 'closed')
    holds.holdUntilClosed(take(store, 300), closed)
    await waitFor(() => holds.released === 1, 'given back')
    assert.equal(free(store, 300), true)
    holds.holdUntilClosed(take(store, 300, false), new PassThrough())
    await waitFor(() => holds.released === 2, 'given back')
    assert.deepEqual([holds.holding, free(store, 300)], [0, true])
    assert.equal(holds.inFlight.get('p'), undefined, 'never counted in flight')
  })

  it('renews a held slot every third of its lease, so it outlives the lease', async () => {
    const store = new MemoryStore({ maxBytes: 1 << 20 })
    const holds = new SlotHolds(store, Date.now)
    const end = new PassThrough()
    const start = Date.now()
    holds.holdUntilClosed(take(store, 1), end)
    await waitFor(() => Date.now() > start + 1500, 'past the lease of 1 s')
    assert.equal(free(store, 1), false, 'still held')
    end.destroy()
    await waitFor(() => holds.released === 1, 'given back')
    assert.equal(free(store, 1), true)
  })

  it('a give-back asked for while a renewal is out waits for the renewal, then goes', async () => {
    const mem = new MemoryStore({ maxBytes: 1 << 20 })
    const store = new SlowStore(mem)
    const holds = new SlotHolds(store, Date.now)
    const end = new PassThrough()
    holds.holdUntilClosed(take(mem, 1), end)
    await waitFor(() => store.pending.length === 1, 'a renewal sent')
    const closed = once(end, 'close')
    end.destroy()
    await closed
    assert.equal(store.pending.length, 1, 'the give-back waits')
    store.answer()
    await new Promise((r) => setImmediate(r))
    assert.equal(store.pending.length, 1, 'the give-back is sent once the renewal answered')
    assert.equal(free(mem, 1), false)
    store.answer()
    assert.deepEqual([holds.released, free(mem, 1)], [1, true])
  })

  it('the give-backs of one event-loop turn leave in one store call', async () => {
    const mem = new MemoryStore({ maxBytes: 1 << 20 })
    const store = new SlowStore(mem)
    const holds = new SlotHolds(store, Date.now)
    const ends = [new PassThrough(), new PassThrough(), new PassThrough()]
    for (const e of ends) holds.holdUntilClosed(take(mem, 300, true, 3), e)
    const closed = ends.map((e) => once(e, 'close'))
    for (const e of ends) e.destroy()
    await Promise.all(closed)
    await waitFor(() => store.pending.length > 0, 'sent')
    assert.equal(store.pending.length, 1, 'one call')
    store.answer()
    assert.equal(holds.released, 3)
    assert.equal(mem.applyNow([{ key: KEY, limit: concurrencyLimit(3, 300), cost: 0, shadow: false }], Date.now() / 1000)[0]!.value, 3)
  })

  it('a give-back the store fails is dropped, counted and reported', async () => {
    const mem = new MemoryStore({ maxBytes: 1 << 20 })
    const store = new SlowStore(mem)
    store.failing = true
    const errors: string[] = []
    const holds = new SlotHolds(store, Date.now, (e) => errors.push(e.message))
    const end = new PassThrough()
    end.destroy()
    holds.holdUntilClosed(take(mem, 300, false), end)
    await waitFor(() => holds.dropped === 1, 'dropped')
    assert.deepEqual([holds.released, errors], [0, ['store down']])
  })
})
