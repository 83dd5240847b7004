/**
 * The keys a replay (test-replay.ts) rejected most, in bounded memory however
 * many keys a log holds: the Space-Saving sketch (Metwally, Agrawal and El
 * Abbadi, 2005). It tracks at most `capacity` keys; a key not tracked takes
 * the place of the one with the smallest count and starts from that count,
 * which it may not have earned (`error`). Every key seen more than
 * total / capacity times is tracked, and a tracked key's count is at most
 * `error` above its true count; while no key was ever dropped, every count is
 * exact. A min-heap finds the smallest count, so each key costs O(log capacity).
 */

export interface TopKey {
  key: string
  /** Times seen: exact when `error` is 0, otherwise between count − error and count. */
  count: number
  error: number
}

interface Entry extends TopKey {
  /** Position in the heap. */
  at: number
}

export class TopKeys {
  private readonly heap: Entry[] = []
  private readonly index = new Map<string, Entry>()
  /** A key was dropped to make room: counts may be overestimated, and more keys were seen than are tracked. */
  saturated = false

  constructor(readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError('capacity must be a positive integer')
  }

  add(key: string): void {
    const e = this.index.get(key)
    if (e !== undefined) {
      e.count++
      this.down(e.at)
    } else if (this.heap.length < this.capacity) {
      const n: Entry = { key, count: 1, error: 0, at: this.heap.length }
      this.heap.push(n)
      this.index.set(key, n)
      this.up(n.at)
    } else {
      const min = this.heap[0]!
      this.index.delete(min.key)
      this.saturated = true
      min.key = key
      min.error = min.count
      min.count++
      this.index.set(key, min)
      this.down(0)
    }
  }

  /** Keys tracked (every key seen while not saturated). */
  get size(): number {
    return this.heap.length
  }

  /** The `n` highest counts, highest first (ties by key). */
  top(n: number): TopKey[] {
    return this.heap
      .map(({ key, count, error }) => ({ key, count, error }))
      .sort((a, b) => b.count - a.count || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))
      .slice(0, n)
  }

  private swap(i: number, j: number): void {
    const a = this.heap[i]!
    const b = this.heap[j]!
    this.heap[i] = b
    this.heap[j] = a
    b.at = i
    a.at = j
  }

  private up(i: number): void {
    while (i > 0) {
      const p = (i - 1) >> 1
      if (this.heap[p]!.count <= this.heap[i]!.count) return
      this.swap(i, p)
      i = p
    }
  }

  private down(i: number): void {
    const h = this.heap
    for (;;) {
      const l = 2 * i + 1
      const r = l + 1
      let m = i
      if (l < h.length && h[l]!.count < h[m]!.count) m = l
      if (r < h.length && h[r]!.count < h[m]!.count) m = r
      if (m === i) return
      this.swap(i, m)
      i = m
    }
  }
}
