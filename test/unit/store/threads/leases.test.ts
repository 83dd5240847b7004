/**
 * The lease table's fetch state when the fetching thread is gone: two
 * LeaseTable views of one buffer stand for two worker threads, the
 * create()d one for the supervisor. A fetch is freed by the supervisor
 * (releaseOf) or, failing that, once FETCH_BOUND_MS has passed; either way
 * the other thread fetches the key itself, and the old fetch's late answer
 * gives its slice back instead of opening a second lease.
 */
import assert from 'node:assert/strict'
import { it } from 'node:test'
import { bucketLimit } from '../../../../src/algorithms/kinds/token-bucket/kind.js'
import { FETCH, FETCH_BOUND_MS, LeaseTable, SPENT, WAIT } from '../../../../src/store/threads/leases.js'

const lim = bucketLimit(1, 100)
const cfg = { tokens: 10, ttlMs: 1000 }

function threads(): { sup: LeaseTable; a: LeaseTable; b: LeaseTable } {
  const sup = LeaseTable.create(16)
  return { sup, a: new LeaseTable(sup.buffer, 7), b: new LeaseTable(sup.buffer, 8) }
}

it('the supervisor frees the fetch of a dead thread: the waiting thread fetches at once', () => {
  const { sup, a, b } = threads()
  assert.equal(a.take('k', lim, cfg, 1, 0), FETCH)
  assert.equal(sup.fetching('k'), 7)
  assert.equal(b.take('k', lim, cfg, 1, 10), WAIT)
  const gen = Atomics.load(sup.gens, b.group)
  assert.equal(sup.releaseOf(8), 0, 'a live thread holds no fetch here: nothing freed')
  assert.equal(sup.fetching('k'), 7)
  assert.ok(sup.releaseOf(7) >= 1)
  assert.notEqual(Atomics.load(sup.gens, b.group), gen, 'the waiters are woken')
  assert.equal(b.take('k', lim, cfg, 1, 20), FETCH)
  assert.equal(sup.fetching('k'), 8)
})

it('a fetch older than FETCH_BOUND_MS is taken over; its late answer gives the slice back', () => {
  const { sup, a, b } = threads()
  assert.equal(a.take('k', lim, cfg, 1, 0), FETCH)
  assert.equal(b.take('k', lim, cfg, 1, FETCH_BOUND_MS - 1), WAIT, 'a fetch within the bound is waited for')
  assert.equal(b.take('k', lim, cfg, 1, FETCH_BOUND_MS), FETCH)
  assert.equal(sup.fetching('k'), 8)
  assert.equal(a.open('k', lim, cfg, 9, 90, FETCH_BOUND_MS + 5), undefined, 'not a second lease')
  assert.deepEqual(
    a.returns.map((r) => [r.key, r.amount]),
    [['k', 9]],
    'the late slice goes back to the store',
  )
  assert.ok(b.open('k', lim, cfg, 9, 81, FETCH_BOUND_MS + 6))
  assert.equal(b.take('k', lim, cfg, 1, FETCH_BOUND_MS + 7), SPENT)
  assert.equal(a.take('k', lim, cfg, 1, FETCH_BOUND_MS + 7), SPENT, 'one lease, for both threads')
})

it('the sweep frees an abandoned fetch and wakes its waiters; one within the bound stays', () => {
  const { sup, a, b } = threads()
  assert.equal(a.take('old', lim, cfg, 1, 0), FETCH)
  assert.equal(a.take('new', lim, cfg, 1, 1000), FETCH)
  assert.equal(b.take('old', lim, cfg, 1, 10), WAIT)
  const gen = Atomics.load(sup.gens, b.group)
  const used = sup.used
  sup.sweep(FETCH_BOUND_MS + 1)
  assert.equal(sup.fetching('old'), undefined)
  assert.equal(sup.fetching('new'), 7)
  assert.equal(sup.used, used - 1)
  assert.notEqual(Atomics.load(sup.gens, b.group), gen, 'the waiters are woken')
  assert.equal(b.take('old', lim, cfg, 1, FETCH_BOUND_MS + 2), FETCH)
})
