/**
 * Arguments and replies of the PostgreSQL functions (layouts in
 * sql.ts), as array literals built here: one string per argument
 * instead of pg turning each JS array element into a string on its own.
 * Numbers are written by String(), the shortest text that reads back to the
 * same double, so nothing is rounded on the way.
 */
import { PARAMS } from '../../algorithms/algorithm.js'
import { TAKE_REPLY } from './sql.js'
import { storedKey } from '../stored-key.js'
import type { Adjustment, Check, Outcomes } from '../store.js'

/** A text[] literal: every key quoted, `\` and `"` escaped. */
const textArray = (xs: readonly string[]): string => `{${xs.map((x) => `"${x.replace(/[\\"]/g, '\\$&')}"`).join(',')}}`

/** Distinct keys as stored (stored-key.ts; 1-based index per key) and the numbers per item, via `row(item, keyIndex, nums)`. */
function layout<T extends { key: string }>(
  items: Iterable<T>,
  row: (item: T, k: number, nums: number[]) => void,
): { keys: string; nums: number[] } {
  const keys: string[] = []
  const index = new Map<string, number>()
  const nums: number[] = []
  for (const it of items) {
    const key = storedKey(it.key)
    let k = index.get(key)
    if (k === undefined) index.set(key, (k = keys.push(key)))
    row(it, k, nums)
  }
  return { keys: textArray(keys), nums }
}

function limitNums(limit: Check['limit'], nums: number[]): void {
  nums.push(limit.kind.id)
  for (let j = 0; j < PARAMS; j++) nums.push(limit.params[j] ?? 0)
}

/** `take` arguments for several requests: keys, 7 numbers per check, checks per request. */
export function takeValues(requests: readonly (readonly Check[])[]): string[] {
  const { keys, nums } = layout(requests.flat(), (c, k, nums) => {
    nums.push(k)
    limitNums(c.limit, nums)
    nums.push(c.cost, c.shadow ? 1 : 0)
  })
  return [keys, `{${nums.join(',')}}`, `{${requests.map((r) => r.length).join(',')}}`]
}

/** `adjust` arguments: keys, 6 numbers per adjustment. */
export function adjustValues(adjustments: readonly Adjustment[]): string[] {
  const { keys, nums } = layout(adjustments, (a, k, nums) => {
    nums.push(k)
    limitNums(a.limit, nums)
    nums.push(a.amount)
  })
  return [keys, `{${nums.join(',')}}`]
}

/** Outcomes of the `n` checks whose reply starts at `off` (status -1: not evaluated). */
export function readOutcomes(reply: readonly number[], off: number, n: number): Outcomes {
  const out: Outcomes = new Array(n)
  for (let i = 0; i < n; i++) {
    const o = off + i * TAKE_REPLY
    const status = reply[o]!
    if (status >= 0) out[i] = { allowed: status === 1, value: reply[o + 1]!, retryAfter: reply[o + 2]! }
  }
  return out
}
