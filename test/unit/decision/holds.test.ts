/**
 * Requests held for their debt (decision/holds.ts) on real timers: forwarded
 * once the wait is over, refused past the bound with their charges given
 * back, given back when their client leaves (before the wait is over, or just
 * as it ends), and never twice.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { Decision } from '../../../src/engine/decision.js'
import { HoldSlots } from '../../../src/decision/hold-slots.js'
import { type HoldEnd, Holds } from '../../../src/decision/holds.js'
import type { Adjustment } from '../../../src/store/store.js'
import { bucketLimit } from '../../../src/algorithms/kinds/token-bucket/kind.js'

const charge: Adjustment = { key: 'tb:smooth:a', limit: bucketLimit(5, 1, 2), amount: 1 }
const refused: Decision = { allowed: false, status: 429, reason: 'token_bucket_exceeded', mode: 'enforce', matchedPolicies: ['api'] }

function inDebt(waitMs: number): Decision {
  return {
    allowed: true,
    status: 200,
    reason: 'all_rules_passed',
    mode: 'enforce',
    matchedPolicies: ['api'],
    delayMs: waitMs,
    debt: { waitMs, charges: [charge], refused, policyId: 'api' },
  }
}

function holds(max: number) {
  const given: Adjustment[][] = []
  const ends: HoldEnd[] = []
  const held: number[] = []
  const slots = new HoldSlots(max)
  const h = new Holds(slots, {
    giveBack: (c) => void given.push([...c]),
    held: (_p, ms) => void held.push(ms),
    ended: (_p, end) => void ends.push(end),
  })
  return { h, slots, given, ends, held }
}

test('a held request is let go once its wait is over, and its slot is free again', async () => {
  const { h, slots, given, ends, held } = holds(4)
  const started = Date.now()
  const d = h.hold(inDebt(30))
  assert.equal(slots.total, 1)
  await new Promise<void>((resolve) => d.hold!.then(resolve))
  assert.ok(Date.now() - started >= 29, `held ${Date.now() - started} ms`)
  assert.deepEqual([slots.total, given.length, ends, held], [0, 0, ['forwarded'], [30]])
  let late = false
  d.hold!.then(() => (late = true))
  assert.equal(late, true, 'asked after the wait: at once')
})

test('past the bound the request gets its refusal, its charges given back', () => {
  const { h, given, ends } = holds(1)
  const first = h.hold(inDebt(1000))
  const second = h.hold(inDebt(1000))
  assert.equal(second, refused)
  assert.deepEqual(given, [[charge]])
  assert.deepEqual(ends, ['refused'])
  first.hold!.abandon()
})

test('a client that leaves while held: the slot is freed, the charges given back once, the request never let go', async () => {
  const { h, slots, given, ends } = holds(4)
  const d = h.hold(inDebt(20))
  let forwarded = false
  d.hold!.then(() => (forwarded = true))
  d.hold!.abandon()
  d.hold!.abandon()
  assert.deepEqual([slots.total, given, ends], [0, [[charge]], ['abandoned']])
  const other = h.hold(inDebt(40))
  await new Promise<void>((resolve) => other.hold!.then(resolve))
  assert.equal(forwarded, false)
})

test('a client found gone as the wait ends gives back; one that leaves after being forwarded does not', async () => {
  const { h, given, ends } = holds(4)
  const gone = h.hold(inDebt(5))
  await new Promise<void>((resolve) =>
    gone.hold!.then(() => {
      gone.hold!.abandon()
      resolve()
    }),
  )
  const served = h.hold(inDebt(5))
  await new Promise<void>((resolve) => served.hold!.then(resolve))
  served.hold!.abandon()
  assert.deepEqual(given, [[charge]])
  assert.deepEqual(ends, ['abandoned', 'forwarded'])
})

test('charges that depend on when they are given back (a sliding window’s held request) are given back as they stand when the client leaves', async () => {
  const { h, given } = holds(4)
  const asked: number[] = []
  const d = inDebt(1000)
  const late: Adjustment = { ...charge, amount: 2 }
  d.debt!.chargesAfter = (elapsedMs) => {
    asked.push(elapsedMs)
    return [late]
  }
  const started = performance.now()
  h.hold(d)
  await new Promise((r) => setTimeout(r, 30))
  d.hold!.abandon()
  assert.deepEqual(given, [[late]])
  assert.equal(asked.length, 1)
  assert.ok(asked[0]! >= 29 && asked[0]! <= performance.now() - started, `given back ${asked[0]} ms into the hold`)
})
