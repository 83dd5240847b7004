/** The Space-Saving sketch of the keys a replay rejected most (src/commands/test-top-keys.ts): exact while it has room, bounded after. */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { TopKeys } from '../../../src/commands/test-top-keys.js'

/** A deterministic stream: key i drawn with weight 1/(i+1) (a few heavy keys, a long tail), from a seeded LCG. */
function stream(n: number, keys: number, seed: number): string[] {
  const weights = Array.from({ length: keys }, (_, i) => 1 / (i + 1))
  const total = weights.reduce((a, b) => a + b, 0)
  let x = seed
  const out: string[] = []
  for (let k = 0; k < n; k++) {
    x = (x * 1103515245 + 12345) % 2 ** 31
    let r = (x / 2 ** 31) * total
    let i = 0
    while (r >= weights[i]! && i < keys - 1) r -= weights[i++]!
    out.push(`k${i}`)
  }
  return out
}

test('with room for every key the counts are exact, highest first, ties by key', () => {
  const t = new TopKeys(10)
  for (const k of ['b', 'a', 'c', 'a', 'b', 'a', 'd']) t.add(k)
  assert.deepEqual(t.top(3), [
    { key: 'a', count: 3, error: 0 },
    { key: 'b', count: 2, error: 0 },
    { key: 'c', count: 1, error: 0 },
  ])
  assert.equal(t.size, 4)
  assert.equal(t.saturated, false)
})

test('a new key past capacity replaces the smallest count and inherits it as its error', () => {
  const t = new TopKeys(2)
  for (const k of ['a', 'a', 'a', 'b', 'c']) t.add(k)
  assert.deepEqual(t.top(5), [
    { key: 'a', count: 3, error: 0 },
    { key: 'c', count: 2, error: 1 },
  ])
  assert.equal(t.saturated, true)
})

test('on a long skewed stream: never more than capacity keys, each count within its error of the truth, every heavy key tracked', () => {
  for (const [capacity, seed] of [
    [20, 1],
    [50, 7],
    [100, 42],
  ] as const) {
    const keys = stream(20000, 2000, seed)
    const truth = new Map<string, number>()
    const t = new TopKeys(capacity)
    for (const k of keys) {
      truth.set(k, (truth.get(k) ?? 0) + 1)
      t.add(k)
    }
    assert.equal(t.size, capacity)
    assert.equal(t.saturated, true)
    const tracked = t.top(capacity)
    assert.equal(
      tracked.reduce((a, e) => a + e.count, 0),
      keys.length,
      'the counts add up to the stream length',
    )
    for (const e of tracked) {
      const real = truth.get(e.key)!
      assert.ok(e.count - e.error <= real && real <= e.count, `${e.key}: ${real} within [${e.count - e.error}, ${e.count}]`)
      assert.ok(e.error <= keys.length / capacity)
    }
    for (const [k, c] of truth)
      if (c > keys.length / capacity)
        assert.ok(
          tracked.some((e) => e.key === k),
          `${k} (${c}) is tracked at capacity ${capacity}`,
        )
    const heaviest = [...truth].sort((a, b) => b[1] - a[1])[0]![0]
    assert.equal(t.top(1)[0]!.key, heaviest)
  }
})

test('capacity must be a positive integer', () => {
  assert.throws(() => new TopKeys(0), RangeError)
  assert.throws(() => new TopKeys(1.5), RangeError)
})
