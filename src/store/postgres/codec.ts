/**
 * Arguments and replies of the PostgreSQL functions (layouts in
 * sql.ts), as array literals built here: one string per argument
 * instead of pg turning each JS array element into a string on its own.
 * Numbers are written by String(), the shortest text that reads back to the
 * same double, so nothing is rounded on the way.
 */
import { PARAMS } from '../../algorithms/algorithm.js'
import { ON_REJECT_MODE, TAKE_REPLY } from './sql.js'
import { storedKey } from '../stored-key.js'
import type { Adjustment, Check, Outcomes } from '../store.js'

/** A text[] literal: every key quoted, `\` and `"` escaped. */
const textArray = (xs: readonly string[]): string => `{${xs.map((x) => `"${x.replace(/[\\"]/g, '\\$&')}"`).join(',')}}`

/** Distinct keys as stored (stored-key.ts; 1-based index per key) and the numbers per item, via `row(item, keyIndex, nums)`. */
class Layout {
  readonly keys: string[] = []
  readonly nums: number[] = []
  private readonly index = new Map<string, number>()

  add<T extends { key: string }>(items: Iterable<T>, row: (item: T, k: number, nums: number[]) => void): this {
    for (const it of items) {
      const key = storedKey(it.key)
      let k = this.index.get(key)
      if (k === undefined) this.index.set(key, (k = this.keys.push(key)))
      row(it, k, this.nums)
    }
    return this
  }
}

function limitNums(limit: Check['limit'], nums: number[]): void {
  nums.push(limit.kind.id)
  for (let j = 0; j < PARAMS; j++) nums.push(limit.params[j] ?? 0)
}

/** A request of a `take` batch: its checks, and the array its read-backs go to (store.ts apply's `reads`). */
export interface TakeRequest {
  readonly checks: readonly Check[]
  readonly reads?: Outcomes | undefined
}

/** Whether `take` answers read-backs for a request: they were asked for, and a check carries an OnReject. */
export const asksReads = (r: TakeRequest): boolean => r.reads !== undefined && r.checks.some((c) => c.onReject !== undefined)

/** `take` arguments for several requests: keys, 7 numbers per check (the group with its OnReject when read-backs are asked), checks per request. */
export function takeValues(requests: readonly TakeRequest[]): string[] {
  const l = new Layout()
  for (const r of requests) {
    const back = asksReads(r)
    l.add(r.checks, (c, k, nums) => {
      nums.push(k)
      limitNums(c.limit, nums)
      nums.push(c.cost, (c.shadow ? 1 : 0) + (back && c.onReject !== undefined ? 2 * ON_REJECT_MODE[c.onReject] : 0))
    })
  }
  return [textArray(l.keys), `{${l.nums.join(',')}}`, `{${requests.map((r) => r.checks.length).join(',')}}`]
}

/** Numbers of a request's reply in `take`'s: 3 per check, twice that with read-backs. */
export const replyLength = (r: TakeRequest): number => r.checks.length * TAKE_REPLY * (asksReads(r) ? 2 : 1)

/** `adjust` arguments: keys, 6 numbers per adjustment. */
export function adjustValues(adjustments: readonly Adjustment[]): string[] {
  const l = new Layout().add(adjustments, (a, k, nums) => {
    nums.push(k)
    limitNums(a.limit, nums)
    nums.push(a.amount)
  })
  return [textArray(l.keys), `{${l.nums.join(',')}}`]
}

/** The statement that deletes the keys' rows (the admin API's reset), the keys as stored. */
export const resetQuery = (prefix: string, keys: readonly string[]): { text: string; values: [string[]] } => ({
  text: `DELETE FROM ${prefix}counters WHERE key = ANY($1::text[])`,
  values: [keys.map(storedKey)],
})

/** Outcomes of the `n` checks whose reply starts at `off` (status -1: not evaluated), into `out`. */
export function readOutcomes(reply: readonly number[], off: number, n: number, out: Outcomes = new Array(n)): Outcomes {
  for (let i = 0; i < n; i++) {
    const o = off + i * TAKE_REPLY
    const status = reply[o]!
    if (status >= 0) out[i] = { allowed: status === 1, value: reply[o + 1]!, retryAfter: reply[o + 2]! }
  }
  return out
}
