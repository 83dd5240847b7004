/**
 * A bounded map of recently used entries, for per-request lookups whose
 * inputs repeat (User-Agents, GeoIP records). Two generations instead of a
 * linked-list LRU: a hit in the young generation is one Map.get with no
 * bookkeeping, which is the common case on the hot path; a hit in the old one
 * promotes the entry. When the young generation is full it becomes the old
 * one and the previous old one is dropped, so memory stays within
 * 2 × `limit` entries and anything used in the last `limit` insertions stays.
 */
export class RecentCache<V> {
  private young = new Map<string | number, V>()
  private old = new Map<string | number, V>()

  /** `limit`: entries per generation (at most twice as many are held). */
  constructor(private readonly limit: number) {}

  get(key: string | number): V | undefined {
    const v = this.young.get(key)
    if (v !== undefined) return v
    const o = this.old.get(key)
    if (o !== undefined) this.set(key, o)
    return o
  }

  set(key: string | number, value: V): void {
    if (this.young.size >= this.limit) {
      this.old = this.young
      this.young = new Map()
    }
    this.young.set(key, value)
  }

  get size(): number {
    return this.young.size + this.old.size
  }
}
