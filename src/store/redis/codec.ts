/**
 * The Redis scripts' arguments and replies, written once for both topologies:
 * the standalone store sends them as prepared RESP text (numbers from the
 * bulkNumber cache), the cluster store as ioredis argument lists. Layouts are
 * those of script.ts.
 */
import { PARAMS } from '../../algorithms/algorithm.js'
import { StoreProtocolError } from '../../errors.js'
import { ON_REJECT_MODE, TAKE_REPLY_BYTES } from './script.js'
import { bulk, bulkNumber } from './resp-connection.js'
import { storedKey } from '../stored-key.js'
import type { Adjustment, Check, Outcomes } from '../store.js'

type Visit = (arg: string | number) => void

/** Kind id, then exactly PARAMS parameters (0 for those a kind does not use). */
function visitLimit(limit: Check['limit'], visit: Visit): void {
  visit(limit.kind.id)
  const p = limit.params
  for (let j = 0; j < PARAMS; j++) visit(j < p.length ? p[j]! : 0)
}

/**
 * The take script's arguments for checks[idx…] (all checks without idx): numkeys, keys (as stored:
 * stored-key.ts), then kind, params, cost, group per check; with `reads`, the group carries the
 * check's OnReject (script.ts ON_REJECT_MODE).
 */
export function visitTakeArgs(checks: readonly Check[], idx: readonly number[] | undefined, visit: Visit, reads = false): void {
  const n = idx === undefined ? checks.length : idx.length
  visit(n)
  for (let k = 0; k < n; k++) visit(storedKey(checks[idx === undefined ? k : idx[k]!]!.key))
  for (let k = 0; k < n; k++) {
    const c = checks[idx === undefined ? k : idx[k]!]!
    visitLimit(c.limit, visit)
    visit(c.cost)
    visit((c.shadow ? 1 : 0) + (reads && c.onReject !== undefined ? 2 * ON_REJECT_MODE[c.onReject] : 0))
  }
}

/** The adjust script's arguments: numkeys, keys, then kind, params, amount per key. */
export function visitAdjustArgs(adjustments: readonly Adjustment[], visit: Visit): void {
  visit(adjustments.length)
  for (const a of adjustments) visit(storedKey(a.key))
  for (const a of adjustments) {
    visitLimit(a.limit, visit)
    visit(a.amount)
  }
}

/** Arguments as RESP bulk strings (standalone store): `argc` of them in `args`. */
export function encodeArgs(layout: (visit: Visit) => void): { argc: number; args: string } {
  let argc = 0
  let args = ''
  layout((a) => {
    argc++
    args += typeof a === 'number' ? bulkNumber(a) : bulk(a)
  })
  return { argc, args }
}

/** Arguments as a list of strings (cluster store, ioredis). */
export function listArgs(layout: (visit: Visit) => void): string[] {
  const out: string[] = []
  layout((a) => out.push(String(a)))
  return out
}

/** True when `reply` is the take script's answer for `n` checks, read-backs or not (anything else is not read). */
export const takeReplyFits = (reply: unknown, n: number): boolean =>
  Buffer.isBuffer(reply) && (reply.length === n * TAKE_REPLY_BYTES || reply.length === 2 * n * TAKE_REPLY_BYTES)

/** Whether a call of these checks, sent with read-backs asked, gets them: one of them carries an OnReject. */
export const asksReads = (checks: readonly Check[], idx?: readonly number[]): boolean =>
  idx === undefined ? checks.some((c) => c.onReject !== undefined) : idx.some((i) => checks[i]!.onReject !== undefined)

/** Status of check k in a take reply: 1 allowed, 0 rejected, -1 not evaluated. */
export const takeStatus = (reply: Buffer, k: number): number => reply.readInt8(k * TAKE_REPLY_BYTES)

/** Value and wait of check k in a take reply. */
export const takeFigures = (reply: Buffer, k: number): { value: number; retryAfter: number } => ({
  value: reply.readDoubleLE(k * TAKE_REPLY_BYTES + 1),
  retryAfter: reply.readDoubleLE(k * TAKE_REPLY_BYTES + 9),
})

/**
 * Take reply → outcomes, written into `out` at the checks' own positions; `reads`: the call was
 * sent asking for read-backs (asksReads), which follow the outcomes when a group rejected and go there.
 */
export function readTake(reply: Buffer, out: Outcomes, idx?: readonly number[], reads?: Outcomes): void {
  const n = idx === undefined ? out.length : idx.length
  // Read-backs come only from a call with a rejected group.
  const records = reads !== undefined && Buffer.isBuffer(reply) && reply.length === 2 * n * TAKE_REPLY_BYTES ? 2 * n : n
  if (!Buffer.isBuffer(reply) || reply.length !== records * TAKE_REPLY_BYTES)
    throw new StoreProtocolError(
      `redis script reply of ${Buffer.isBuffer(reply) ? reply.length : typeof reply} bytes, expected ${records * TAKE_REPLY_BYTES}`,
    )
  for (let k = 0; k < records; k++) {
    const o = k * TAKE_REPLY_BYTES
    const status = reply.readInt8(o)
    if (status < 0) continue
    const into = k < n ? out : reads!
    into[idx === undefined ? k % n : idx[k % n]!] = {
      allowed: status === 1,
      value: reply.readDoubleLE(o + 1),
      retryAfter: reply.readDoubleLE(o + 9),
    }
  }
}
