/** boundedMemo and BoundedMemo3 (src/bounded-cache.ts): the decision path's memos stay bounded, and a hit returns what was set. */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { BoundedMemo3, boundedMemo, MAX_MAP_KEY } from '../../src/bounded-cache.js'

test('boundedMemo: a value set is found again until the memo is full', () => {
  const m = boundedMemo<string, number>(3)
  m.set('a', 1)
  m.set('b', 2)
  assert.equal(m.get('a'), 1)
  assert.equal(m.get('b'), 2)
  assert.equal(m.get('c'), undefined)
})

test('boundedMemo: reaching max empties it whole, then it fills again (never more than max entries)', () => {
  const m = boundedMemo<string, number>(3)
  for (let i = 0; i < 3; i++) m.set(`k${i}`, i)
  assert.deepEqual([m.get('k0'), m.get('k1'), m.get('k2')], [0, 1, 2])
  m.set('k3', 3)
  assert.deepEqual([m.get('k0'), m.get('k1'), m.get('k2')], [undefined, undefined, undefined])
  assert.equal(m.get('k3'), 3)
  m.set('k4', 4)
  m.set('k5', 5)
  assert.deepEqual([m.get('k3'), m.get('k4'), m.get('k5')], [3, 4, 5])
})

test('BoundedMemo3: keys are the three parts, not their joined text; reaching max empties it whole', () => {
  const m = new BoundedMemo3<number>(3)
  m.set('a|b', 'c', 'd', 1)
  m.set('a', 'b|c', 'd', 2) // same text joined with `|`, another key
  assert.equal(m.get('a|b', 'c', 'd'), 1)
  assert.equal(m.get('a', 'b|c', 'd'), 2)
  assert.equal(m.get('a', 'b', 'c|d'), undefined)
  m.set('a', 'b|c', 'd', 5) // overwriting does not count as a new entry
  m.set('x', 'y', 'z', 3)
  assert.deepEqual([m.get('a|b', 'c', 'd'), m.get('a', 'b|c', 'd'), m.get('x', 'y', 'z')], [1, 5, 3])
  m.set('p', 'q', 'r', 4)
  assert.deepEqual([m.get('a|b', 'c', 'd'), m.get('x', 'y', 'z'), m.get('p', 'q', 'r')], [undefined, undefined, 4])
})

test('keys V8 would hash by their length alone (over 16,383 characters) are not memoised: 4,000 of them cost no collisions', () => {
  const m = boundedMemo<string, number>(10_000)
  const m3 = new BoundedMemo3<number>(10_000)
  const pad = 'p'.repeat(MAX_MAP_KEY)
  const t0 = process.hrtime.bigint()
  for (let i = 0; i < 4000; i++) {
    const k = `${pad}${String(i).padStart(6, '0')}`
    m.set(k, i)
    m3.set(k, 'ip', 'sub', i)
    assert.equal(m.get(k), undefined)
    assert.equal(m3.get(k, 'ip', 'sub'), undefined)
  }
  const s = Number(process.hrtime.bigint() - t0) / 1e9
  assert.ok(s < 3, `${s.toFixed(1)} s`)
  // One character shorter: memoised as before.
  m.set(pad, 1)
  assert.equal(m.get(pad), 1)
})
