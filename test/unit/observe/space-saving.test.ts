/**
 * The Space-Saving sketch (src/observe/space-saving.ts) against exact counts, on any stream fast-check
 * draws: at most `capacity` counters, count ≥ true count ≥ count − error for every item counted, every
 * item seen more than N / capacity times counted, nothing uncounted seen more than the floor; the same
 * for a stream split over several sketches and merged, as the supervisor merges its workers'.
 */
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import fc from 'fast-check'
import { mergeSnapshots, type Snapshot, SpaceSaving, topEntries } from '../../../src/observe/space-saving.js'

const exact = (stream: readonly string[]): Map<string, number> => {
  const m = new Map<string, number>()
  for (const x of stream) m.set(x, (m.get(x) ?? 0) + 1)
  return m
}

/** One group: items are told apart by their id alone. */
const G = {}

const sketchOf = (stream: readonly string[], capacity: number): SpaceSaving<string> => {
  const s = new SpaceSaving<string>(capacity)
  for (const x of stream) s.add(G, x, () => x)
  return s
}

/** The guarantees of a snapshot of `stream` made with `capacity` counters (per sketch). */
function holds(snap: Snapshot<string>, stream: readonly string[], capacity: number): void {
  const truth = exact(stream)
  const n = stream.length
  assert.equal(snap.total, n)
  const seen = new Set<string>()
  for (const e of snap.entries) {
    assert.ok(!seen.has(e.item), `one entry per item: ${e.item}`)
    seen.add(e.item)
    const t = truth.get(e.item) ?? 0
    assert.ok(e.count >= t, `${e.item}: count ${e.count} >= true ${t}`)
    assert.ok(t >= e.count - e.error, `${e.item}: true ${t} >= count ${e.count} - error ${e.error}`)
  }
  for (const [item, t] of truth) {
    if (t > n / capacity) assert.ok(seen.has(item), `${item} seen ${t} of ${n} times (> N/k = ${n / capacity}) is kept`)
    if (!seen.has(item)) assert.ok(t <= snap.floor, `${item} not counted: seen ${t} <= floor ${snap.floor}`)
  }
}

// Few distinct items against small capacities, so sketches fill and replace; a skewed draw makes heavy items.
const item = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom('a', 'b', 'c') },
  { weight: 2, arbitrary: fc.integer({ min: 0, max: 40 }).map((i) => `k${i}`) },
)
const stream = fc.array(item, { maxLength: 400 })

describe('one sketch', () => {
  test('bounded, counts bracket the truth, heavy items kept, the uncounted under the floor, counts sum to N', () => {
    fc.assert(
      fc.property(stream, fc.integer({ min: 1, max: 12 }), (xs, k) => {
        const s = sketchOf(xs, k)
        assert.ok(s.size <= k)
        const snap = s.snapshot()
        holds(snap, xs, k)
        assert.equal(
          snap.entries.reduce((a, e) => a + e.count, 0),
          xs.length,
          'Space-Saving: the counts sum to N',
        )
      }),
      { numRuns: 2000 },
    )
  })

  test('memory stays bounded whatever the number of keys: 100,000 distinct keys and one heavy hitter', () => {
    const s = new SpaceSaving<string>(100)
    let made = 0
    for (let i = 0; i < 100_000; i++) {
      s.add(G, `distinct-${i}`, () => `distinct-${made++}`)
      if (i % 5 === 0) s.add(G, 'heavy', () => 'heavy')
    }
    assert.equal(s.size, 100)
    const [first] = topEntries(s.snapshot(), 1)
    assert.equal(first!.item, 'heavy')
    assert.ok(first!.count >= 20_000 && first!.count - first!.error <= 20_000)
  })

  test('topEntries: most counted first, at most n', () => {
    const s = sketchOf(['x', 'y', 'y', 'z', 'z', 'z'], 10)
    assert.deepEqual(
      topEntries(s.snapshot(), 2).map((e) => [e.item, e.count, e.error]),
      [
        ['z', 3, 0],
        ['y', 2, 0],
      ],
    )
  })

  test('a sketch needs a counter', () => assert.throws(() => new SpaceSaving(0), RangeError))

  test('one id in two groups is two items; a group whose items all lost their counters is forgotten', () => {
    const [a, b] = [{}, {}]
    const s = new SpaceSaving<string>(2)
    s.add(a, 'k', () => 'a:k')
    s.add(b, 'k', () => 'b:k')
    s.add(a, 'k', () => 'a:k')
    assert.deepEqual(
      topEntries(s.snapshot(), 2).map((e) => [e.item, e.count]),
      [
        ['a:k', 2],
        ['b:k', 1],
      ],
    )
    s.add(a, 'other', () => 'a:other') // takes b's counter
    assert.deepEqual(
      s
        .snapshot()
        .entries.map((e) => e.item)
        .sort(),
      ['a:k', 'a:other'],
    )
    assert.equal((s as unknown as { index: Map<object, unknown> }).index.has(b), false)
  })
})

describe('merged sketches (worker threads, window halves)', () => {
  test('the whole stream split over several sketches: the same guarantees for the merge, nothing dropped', () => {
    fc.assert(
      fc.property(fc.array(stream, { minLength: 1, maxLength: 4 }), fc.integer({ min: 1, max: 10 }), fc.boolean(), (parts, k, twice) => {
        let snaps = parts.map((p) => sketchOf(p, k).snapshot())
        // A merge of merges (halves merged in a worker, then workers in the supervisor) holds too.
        if (twice && snaps.length > 1) snaps = [mergeSnapshots(snaps.slice(0, 1), (x) => x), mergeSnapshots(snaps.slice(1), (x) => x)]
        const merged = mergeSnapshots(snaps, (x) => x)
        holds(merged, parts.flat(), k)
        assert.ok(merged.entries.length <= parts.length * k)
      }),
      { numRuns: 2000 },
    )
  })

  test('an item counted in one part and not in another gets that part`s floor, as count and as error', () => {
    const full = sketchOf(['a', 'a', 'b', 'c'], 2) // full: floor is its least count
    const other = sketchOf(['x'], 2) // not full: floor 0
    const floor = full.snapshot().floor
    assert.ok(floor > 0)
    const m = mergeSnapshots([full.snapshot(), other.snapshot()], (x) => x)
    const x = m.entries.find((e) => e.item === 'x')!
    assert.deepEqual([x.count, x.error], [1 + floor, floor])
    assert.equal(m.floor, floor)
    assert.equal(m.total, 5)
  })
})
