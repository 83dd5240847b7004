/**
 * The store contract for a check's OnReject (store.ts): a rejected group's checks charged and
 * read back within the one store call, as `read`, `charge` and `over` say, on every store.
 * Window counters (an hour from the first hit: no boundary inside a case); keys share a Redis
 * Cluster hash tag, so one call is one slot, except where a case spreads them on purpose.
 */
import assert from 'node:assert/strict'
import { it } from 'node:test'
import { counterLimit } from '../../src/algorithms/kinds/window-counter/kind.js'
import type { Check, OnReject, Outcomes, Store } from '../../src/store/store.js'

export interface OnRejectContext {
  store(): Store
  key(label: string): string
  now(): number
}

const counter = (key: string, limit: number, cost = 1, onReject?: OnReject, shadow = false): Check => {
  const c: Check = { key, limit: counterLimit(limit, 3600, -1), cost, shadow }
  if (onReject !== undefined) c.onReject = onReject
  return c
}

export function onRejectCases(x: OnRejectContext): void {
  const apply = (checks: Check[], reads?: Outcomes): Promise<Outcomes> =>
    new Promise((resolve, reject) => x.store().apply(checks, x.now(), (err, o) => (err ? reject(err) : resolve(o!)), reads))
  /** The counts of `keys` now (reads of cost 0, one call each, under a limit none reaches). */
  const counts = async (keys: string[]): Promise<number[]> => {
    const out: number[] = []
    for (const k of keys) out.push((await apply([counter(k, 1e9, 0)]))[0]!.value)
    return out
  }
  /** Three keys of one slot; the second at its limit of 2, the others fresh (limit 2). */
  const setUp = async (label: string, tag = true): Promise<string[]> => {
    const t = x.key(label)
    const keys = [0, 1, 2].map((i) => (tag ? `rls:{${t}}:${i}` : `rls:${t}:${i}`))
    await apply([counter(keys[1]!, 2, 2)])
    return keys
  }
  const call = (keys: string[], mode: OnReject | undefined, cost = 1): Check[] => keys.map((k) => counter(k, 2, cost, mode))
  const value = (o: Outcomes): Array<number | undefined> => [...o].map((r) => r?.value)
  const allowed = (o: Outcomes): Array<boolean | undefined> => [...o].map((r) => r?.allowed)

  it('onReject charge: every check of the rejected group is charged and read back after the charges', async () => {
    const keys = await setUp('charge')
    const reads: Outcomes = new Array(3)
    const out = await apply(call(keys, 'charge'), reads)
    assert.deepEqual(allowed(out), [true, false, undefined], 'the call is decided as without onReject')
    assert.deepEqual(value(reads), [1, 3, 1])
    assert.deepEqual(allowed(reads), [true, false, true])
    assert.ok(reads[1]!.retryAfter >= 1, 'a read over its limit says when its window ends')
    assert.deepEqual(await counts(keys), [1, 3, 1])
  })

  it('onReject over: only the checks whose cost alone goes over their counter are charged', async () => {
    const keys = await setUp('over')
    const reads: Outcomes = new Array(3)
    const out = await apply(call(keys, 'over'), reads)
    assert.deepEqual(allowed(out), [true, false, undefined])
    assert.deepEqual(value(reads), [0, 3, 0])
    assert.deepEqual(allowed(reads), [true, false, true])
    assert.deepEqual(await counts(keys), [0, 3, 0])
  })

  it('onReject read: nothing is charged, every counter of the rejected group is read', async () => {
    const keys = await setUp('read')
    const reads: Outcomes = new Array(3)
    await apply(call(keys, 'read'), reads)
    assert.deepEqual(value(reads), [0, 2, 0])
    assert.deepEqual(allowed(reads), [true, true, true], 'a count at its limit is within it')
    assert.deepEqual(await counts(keys), [0, 2, 0])
  })

  it('onReject without reads is not honoured; an allowed call reads nothing back', async () => {
    const keys = await setUp('ignored')
    const out = await apply(call(keys, 'charge'))
    assert.deepEqual(allowed(out), [true, false, undefined])
    assert.deepEqual(await counts(keys), [0, 2, 0])
    const reads: Outcomes = new Array(2)
    const ok = await apply(call([keys[0]!, keys[2]!], 'charge'), reads)
    assert.deepEqual(allowed(ok), [true, true])
    assert.deepEqual([...reads], [undefined, undefined])
    assert.deepEqual(await counts(keys), [1, 2, 1])
  })

  it('onReject: a counter named twice is charged twice; over decides each on the counter as found', async () => {
    const t = x.key('twice')
    const k = `rls:{${t}}:0`
    const reads: Outcomes = new Array(2)
    // 2 then 2 more of 3: the second goes over after the first, but not alone.
    await apply([counter(k, 3, 2, 'over'), counter(k, 3, 2, 'over')], reads)
    assert.deepEqual(value(reads), [0, 0])
    assert.deepEqual(await counts([k]), [0])
    const again: Outcomes = new Array(2)
    await apply([counter(k, 3, 2, 'charge'), counter(k, 3, 2, 'charge')], again)
    assert.deepEqual(value(again), [4, 4], 'both read after both charges')
    assert.deepEqual(allowed(again), [false, false])
  })

  it('onReject: the shadow group reads back on its own, the enforce group that passed is committed', async () => {
    const keys = await setUp('groups')
    const reads: Outcomes = new Array(3)
    const checks = [counter(keys[0]!, 2, 1, 'charge'), counter(keys[1]!, 2, 1, 'charge', true), counter(keys[2]!, 2, 1, 'charge', true)]
    const out = await apply(checks, reads)
    assert.deepEqual(allowed(out), [true, false, undefined])
    assert.deepEqual(value(reads), [undefined, 3, 1])
    assert.deepEqual(await counts(keys), [1, 3, 1])
  })

  it('onReject over several Redis Cluster slots: read back in the call, or not at all and nothing charged', async () => {
    const keys = await setUp('slots', false)
    const reads: Outcomes = new Array(3)
    const out = await apply(call(keys, 'charge'), reads)
    assert.deepEqual(allowed(out), [true, false, undefined])
    if (reads[0] === undefined) {
      assert.deepEqual([...reads], [undefined, undefined, undefined])
      assert.deepEqual(await counts(keys), [0, 2, 0])
    } else {
      assert.deepEqual(value(reads), [1, 3, 1])
      assert.deepEqual(await counts(keys), [1, 3, 1])
    }
  })
}
