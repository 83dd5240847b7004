/**
 * The keys rejected most lately, per policy, rule and reason, for `GET /v1/admin/top`
 * (docs/admin.md): two Space-Saving sketches (space-saving.ts) of `capacity` counters each, one for
 * the current half window and one for the half before, so a snapshot covers the last half window
 * to whole window and a key rejected long ago drops out. Memory is bounded whatever the number of
 * keys: 2 × capacity counters, each holding one key (itself bounded by the request head's size).
 * No timer: the halves turn over when a reject or a snapshot finds the current one over; they start
 * at multiples of the half window since the epoch, the same instants in every thread.
 *
 * Each thread keeps its own; with worker threads the supervisor merges their snapshots
 * (workers/admin-gather.ts). A snapshot is plain data: the raw key (`composite`, which may hold a
 * credential, and never leaves the process) and the key as shown (credentials as their logged hash).
 */
import { mergeSnapshots, type Snapshot, SpaceSaving } from './space-saving.js'

/** One rejected key as a snapshot shows it. */
export interface TopItem {
  policy: string
  rule: string
  reason: string
  /** The key as shown: credential parts as their logged hash (engine/log-key.ts). */
  key: string
  /** The limit-key values as the counter key holds them (credentials in clear: never answered to a client). */
  composite: string
}

export type TopSnapshot = Snapshot<TopItem>

/** Identity of a snapshot item: what makes two entries the same key. */
export const topItemId = (t: Pick<TopItem, 'policy' | 'rule' | 'reason' | 'composite'>): string =>
  `${t.policy}\0${t.rule}\0${t.reason}\0${t.composite}`

/**
 * What the rejects of one policy, rule and reason share: made once per rule and reason by the caller
 * (admin/top.ts) and passed by reference, so counting a reject builds no string.
 */
export interface RejectGroup<R> {
  policy: string
  rule: string
  reason: string
  /** What `show` needs to tell the key's credential parts (a compiled rule). */
  source: R
}

interface Kept<R> {
  group: RejectGroup<R>
  composite: string
}

export class RejectedKeys<R> {
  private current: SpaceSaving<Kept<R>>
  private previous: SpaceSaving<Kept<R>> | undefined
  /** When the current half began (epoch ms). */
  private since: number
  private readonly halfMs: number

  constructor(
    readonly capacity: number,
    readonly windowMs: number,
    /** The key as shown (credential parts hashed), from what was kept of its rule. */
    private readonly show: (source: R, composite: string) => string,
    nowMs: number,
  ) {
    this.halfMs = windowMs / 2
    this.current = new SpaceSaving(capacity)
    this.since = this.halfOf(nowMs)
  }

  /** When the half holding `nowMs` began: halves start at multiples of the half window since the epoch, so every thread's turn together. */
  private halfOf(nowMs: number): number {
    return Math.floor(nowMs / this.halfMs) * this.halfMs
  }

  /** One reject of `composite` in `group` at `nowMs`. */
  record(group: RejectGroup<R>, composite: string, nowMs: number): void {
    if (nowMs - this.since >= this.halfMs) this.turn(nowMs)
    this.current.add(group, composite, () => ({ group, composite }))
  }

  /** The last half window to whole window of rejects. */
  snapshot(nowMs: number): TopSnapshot {
    if (nowMs - this.since >= this.halfMs) this.turn(nowMs)
    const halves = this.previous === undefined ? [this.current] : [this.previous, this.current]
    const parts = halves.map((h) => {
      const s = h.snapshot()
      return { ...s, entries: s.entries.map((e) => ({ ...e, item: this.plain(e.item) })) }
    })
    return mergeSnapshots(parts, topItemId)
  }

  private plain({ group: g, composite }: Kept<R>): TopItem {
    return { policy: g.policy, rule: g.rule, reason: g.reason, key: this.show(g.source, composite), composite }
  }

  /** The current half is over: it becomes the previous one (none when a whole half went by without a turn). */
  private turn(nowMs: number): void {
    const late = nowMs - this.since >= 2 * this.halfMs
    this.previous = late ? undefined : this.current
    this.current = new SpaceSaving(this.capacity)
    this.since = late ? this.halfOf(nowMs) : this.since + this.halfMs
  }
}
