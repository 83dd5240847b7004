/**
 * The keys a replay (test-replay.ts) rejected most, in bounded memory however
 * many keys a log holds: the Space-Saving sketch the admin API's top keys use
 * too (observe/space-saving.ts; Metwally, Agrawal and El Abbadi, 2005). It
 * tracks at most `capacity` keys; a key not tracked takes the place of the one
 * with the smallest count and starts from that count, which it may not have
 * earned (`error`). Every key seen more than total / capacity times is
 * tracked, and a tracked key's count is at most `error` above its true count;
 * while no key was ever dropped, every count is exact.
 */
import { type Snapshot, SpaceSaving } from '../observe/space-saving.js'

export interface TopKey {
  key: string
  /** Times seen: exact when `error` is 0, otherwise between count − error and count. */
  count: number
  error: number
}

/** Every key of a replay's group is of one kind: one sketch group. */
const KEYS = {}

export class TopKeys {
  private readonly sketch: SpaceSaving<string>

  constructor(readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError('capacity must be a positive integer')
    this.sketch = new SpaceSaving(capacity)
  }

  add(key: string): void {
    this.sketch.add(KEYS, key, () => key)
  }

  /** Keys tracked (every key seen while not saturated). */
  get size(): number {
    return this.sketch.size
  }

  /** A key was dropped to make room: counts may be overestimated, and more keys were seen than are tracked. */
  get saturated(): boolean {
    // A key that took a dropped key's place carries that key's count as its error, and errors never go back to 0.
    return this.snapshot().entries.some((e) => e.error > 0)
  }

  /** The `n` highest counts, highest first (ties by key). */
  top(n: number): TopKey[] {
    return this.snapshot()
      .entries.map(({ item, count, error }) => ({ key: item, count, error }))
      .sort((a, b) => b.count - a.count || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))
      .slice(0, n)
  }

  private snapshot(): Snapshot<string> {
    return this.sketch.snapshot()
  }
}
