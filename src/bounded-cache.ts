/**
 * The gateway's bounded caches, two kinds for two access patterns:
 *
 * - boundedCache: least recently used out once `max` entries are held, for
 *   lookups whose inputs repeat but are many (User-Agents, GeoIP records,
 *   verified tokens). lru-cache, not a hand-made Map: on the User-Agent
 *   cache's access pattern it measured about 3× faster than a Map-based LRU
 *   (a delete and a set per hit), and it is maintained.
 * - boundedMemo: a plain Map emptied whole when it reaches `max`, for memos
 *   of pure functions on the decision path whose inputs are few (policy ids,
 *   jitter seeds). A hit is one Map lookup; an LRU's recency upkeep on every
 *   hit cost the decision gateway about 1 % of its CPU, and evicting all at
 *   once only means recomputing values that are cheap to recompute.
 *
 * Their keys come from requests, and a JS Map hashes them with V8's string
 * hash: seeded at random per process (`--hash-seed=0`, the default), so
 * colliding keys cannot be computed from outside, except that a string
 * longer than MAX_MAP_KEY is hashed by its length alone (V8's
 * String::kMaxHashCalcLength, deps/v8/src/strings/string-hasher-inl.h): such
 * keys of one length all collide, and each insertion walks all of them (on
 * Node 20, 5,000 of them took 20 s). The memos skip such keys (computed
 * afresh each time); callers of boundedCache check mapKeyOk() first.
 */
import { LRUCache } from 'lru-cache'

/** Longest string V8 hashes by its content (String::kMaxHashCalcLength). */
export const MAX_MAP_KEY = 16_383

/** Whether `k` may be a Map key without the collisions of V8's length-only hash of long strings. */
export const mapKeyOk = (k: unknown): boolean => typeof k !== 'string' || k.length <= MAX_MAP_KEY

export type BoundedCache<K extends {}, V extends {}> = LRUCache<K, V>

export function boundedCache<K extends {}, V extends {}>(max: number): BoundedCache<K, V> {
  return new LRUCache<K, V>({ max })
}

/** A memo: a Map emptied whole once it holds `max` entries. */
export class BoundedMemo<K, V> {
  private readonly map = new Map<K, V>()

  constructor(private readonly max: number) {}

  get(key: K): V | undefined {
    return mapKeyOk(key) ? this.map.get(key) : undefined
  }

  set(key: K, value: V): void {
    if (!mapKeyOk(key)) return
    if (this.map.size >= this.max) this.map.clear()
    this.map.set(key, value)
  }
}

/**
 * A memo keyed by three strings through nested Maps, emptied whole once it holds `max` values.
 * For keys made of parts already in hand (policy, rule, reason): joining them into one key
 * string would cost a fresh string and its hash on every lookup.
 */
export class BoundedMemo3<V> {
  private readonly tree = new Map<string, Map<string, Map<string, V>>>()
  private size = 0

  constructor(private readonly max: number) {}

  get(a: string, b: string, c: string): V | undefined {
    if (!mapKeyOk(a) || !mapKeyOk(b) || !mapKeyOk(c)) return undefined
    return this.tree.get(a)?.get(b)?.get(c)
  }

  set(a: string, b: string, c: string, value: V): void {
    if (!mapKeyOk(a) || !mapKeyOk(b) || !mapKeyOk(c)) return
    if (this.size >= this.max) {
      this.tree.clear()
      this.size = 0
    }
    let m1 = this.tree.get(a)
    if (m1 === undefined) this.tree.set(a, (m1 = new Map()))
    let m2 = m1.get(b)
    if (m2 === undefined) m1.set(b, (m2 = new Map()))
    if (!m2.has(c)) this.size++
    m2.set(c, value)
  }
}

export function boundedMemo<K, V>(max: number): BoundedMemo<K, V> {
  return new BoundedMemo<K, V>(max)
}
