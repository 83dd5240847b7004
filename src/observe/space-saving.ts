/**
 * Space-Saving (Metwally, Agrawal, El Abbadi, "Efficient computation of frequent and top-k elements
 * in data streams", 2005): the items seen most often in a stream, in at most `capacity` counters
 * whatever the number of distinct items. A new item, once every counter is taken, takes over the
 * counter of the least counted one, starting from that count (its `error`: what it may have
 * inherited). So, after N items, for every item counted: count ≥ true count ≥ count − error; the
 * smallest count is at most N / capacity; and every item seen more than N / capacity times holds a
 * counter. The counters sit in a binary min-heap (the least counted at the root), so an item costs
 * one Map look-up and O(log capacity) swaps.
 *
 * Snapshots are plain data (they cross threads) and merge (mergeSnapshots): an item missing from
 * one part was seen there at most that part's `floor` times (its smallest count when every counter
 * is taken, else 0), which the merge adds to its count and its error, so the bounds above hold for
 * the merged stream, and an item seen more than N / capacity times in the whole stream was seen
 * more than N_i / capacity times in some part, so it is in the merge. Nothing is dropped: a merge
 * holds at most the sum of its parts' counters.
 */

/** One counted item. */
export interface Counted<T> {
  item: T
  /** Its count: at least its true count. */
  count: number
  /** How much of `count` it may have inherited: count − error ≤ true count. */
  error: number
}

export interface Snapshot<T> {
  entries: Counted<T>[]
  /** An item not in `entries` was seen at most this many times. */
  floor: number
  /** Items seen (N). */
  total: number
}

interface Cell<T> extends Counted<T> {
  group: object
  id: string
  /** Index in the heap. */
  at: number
}

/**
 * Items are named by a group (an object, compared by identity) and an id within it: two look-ups of
 * keys whose hashes are known or short, where one id joining both would be a new string to build and
 * hash for every item.
 */
export class SpaceSaving<T> {
  private readonly heap: Cell<T>[] = []
  private readonly index = new Map<object, Map<string, Cell<T>>>()
  /** Items seen (N). */
  total = 0

  constructor(readonly capacity: number) {
    if (!(capacity >= 1)) throw new RangeError('a sketch needs at least one counter')
  }

  get size(): number {
    return this.heap.length
  }

  /** Counts one occurrence of item `id` of `group`; `make` builds what is kept of it, only when it takes a counter. */
  add(group: object, id: string, make: () => T): void {
    this.total++
    let ids = this.index.get(group)
    const cell = ids?.get(id)
    if (cell !== undefined) {
      cell.count++
      this.down(cell.at)
      return
    }
    if (ids === undefined) this.index.set(group, (ids = new Map()))
    const heap = this.heap
    if (heap.length < this.capacity) {
      const fresh: Cell<T> = { group, id, item: make(), count: 1, error: 0, at: heap.length }
      heap.push(fresh)
      ids.set(id, fresh)
      this.up(fresh.at)
      return
    }
    // Every counter taken: the least counted one's goes to the new item, with its count as the error.
    const least = heap[0]!
    const old = this.index.get(least.group)!
    old.delete(least.id)
    if (old.size === 0 && least.group !== group) this.index.delete(least.group)
    least.group = group
    least.id = id
    least.item = make()
    least.error = least.count
    least.count++
    ids.set(id, least)
    this.down(0)
  }

  /** Every counter, with the floor of the items not counted. */
  snapshot(): Snapshot<T> {
    const floor = this.heap.length === this.capacity ? this.heap[0]!.count : 0
    return { entries: this.heap.map((c) => ({ item: c.item, count: c.count, error: c.error })), floor, total: this.total }
  }

  private up(i: number): void {
    const heap = this.heap
    while (i > 0) {
      const parent = (i - 1) >> 1
      if (heap[parent]!.count <= heap[i]!.count) return
      this.swap(i, parent)
      i = parent
    }
  }

  private down(i: number): void {
    const heap = this.heap
    const n = heap.length
    for (;;) {
      const l = 2 * i + 1
      if (l >= n) return
      const r = l + 1
      const child = r < n && heap[r]!.count < heap[l]!.count ? r : l
      if (heap[i]!.count <= heap[child]!.count) return
      this.swap(i, child)
      i = child
    }
  }

  private swap(i: number, j: number): void {
    const heap = this.heap
    const a = heap[i]!
    const b = heap[j]!
    heap[i] = b
    heap[j] = a
    a.at = j
    b.at = i
  }
}

/** The snapshot of the parts' streams taken together; `idOf` tells which entries are the same item. */
export function mergeSnapshots<T>(parts: readonly Snapshot<T>[], idOf: (item: T) => string): Snapshot<T> {
  /** Per item: its counts and errors summed over the parts that count it, and those parts' floors (once per part). */
  const merged = new Map<string, Counted<T> & { covered: number; part: number }>()
  let floor = 0
  let total = 0
  for (const [p, part] of parts.entries()) {
    floor += part.floor
    total += part.total
    for (const e of part.entries) {
      const id = idOf(e.item)
      const m = merged.get(id)
      if (m === undefined) merged.set(id, { item: e.item, count: e.count, error: e.error, covered: part.floor, part: p })
      else {
        m.count += e.count
        m.error += e.error
        // Two entries of one part for the same item (counted under two groups): its floor covers it once.
        if (m.part !== p) m.covered += part.floor
        m.part = p
      }
    }
  }
  // Each part that does not count an item saw it at most its floor times: counted as seen that often, all of it error.
  const entries = [...merged.values()].map(({ item, count, error, covered }) => ({
    item,
    count: count + floor - covered,
    error: error + floor - covered,
  }))
  return { entries, floor, total }
}

/** The `n` entries counted most, most first (ties: the smaller error first). */
export function topEntries<T>(s: Snapshot<T>, n: number): Counted<T>[] {
  return [...s.entries].sort((a, b) => b.count - a.count || a.error - b.error).slice(0, n)
}
