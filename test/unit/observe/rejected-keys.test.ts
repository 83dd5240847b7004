/**
 * The rejected keys behind GET /v1/admin/top (src/observe/rejected-keys.ts): per policy, rule and reason;
 * shown through the credential hashing it is given, the raw key kept beside; two half windows, so a
 * snapshot covers the last half window to whole window and older rejects drop out; bounded.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { type RejectGroup, RejectedKeys, topItemId } from '../../../src/observe/rejected-keys.js'
import { topEntries } from '../../../src/observe/space-saving.js'

const WINDOW = 300_000
const T0 = 1_700_000_000_000
const show = (secret: boolean, composite: string): string => (secret ? `hash(${composite})` : composite)
const groups = new Map<string, RejectGroup<boolean>>()
/** The group of a policy, rule and reason, made once (as admin/top.ts makes them). */
const g = (policy: string, rule: string, reason: string, secret = false): RejectGroup<boolean> => {
  const id = `${policy}/${rule}/${reason}`
  let group = groups.get(id)
  if (group === undefined) groups.set(id, (group = { policy, rule, reason, source: secret }))
  return group
}

test('counts per policy, rule, reason and key; the key shown as given, the raw one kept', () => {
  const keys = new RejectedKeys<boolean>(10, WINDOW, show, T0)
  for (let i = 0; i < 3; i++) keys.record(g('api', 'per_user', 'token_bucket_exceeded'), 'alice', T0 + i)
  keys.record(g('api', 'per_user', 'token_bucket_exceeded'), 'bob', T0)
  keys.record(g('api', 'per_key', 'token_bucket_exceeded', true), 'sk-123', T0)
  keys.record(g('api', 'per_user', 'sliding_window_exceeded'), 'alice', T0)
  const top = topEntries(keys.snapshot(T0 + 10), 10)
  assert.deepEqual(top[0], {
    item: { policy: 'api', rule: 'per_user', reason: 'token_bucket_exceeded', key: 'alice', composite: 'alice' },
    count: 3,
    error: 0,
  })
  const secret = top.find((e) => e.item.rule === 'per_key')!
  assert.equal(secret.item.key, 'hash(sk-123)')
  assert.equal(secret.item.composite, 'sk-123')
  assert.equal(top.length, 4, 'another reason is another entry')
  assert.equal(keys.snapshot(T0 + 10).total, 6)
})

test('a snapshot covers the last half window to whole window: older rejects drop out', () => {
  const keys = new RejectedKeys<boolean>(10, WINDOW, show, T0)
  keys.record(g('api', 'r', 'x'), 'old', T0)
  keys.record(g('api', 'r', 'x'), 'recent', T0 + WINDOW / 2 + 1) // the second half
  let items = keys.snapshot(T0 + WINDOW / 2 + 2).entries.map((e) => e.item.key)
  assert.deepEqual(items.sort(), ['old', 'recent'], 'within the window: both')
  items = keys.snapshot(T0 + WINDOW + 1).entries.map((e) => e.item.key)
  assert.deepEqual(items, ['recent'], 'a whole window after it began, the first half is gone')
  assert.deepEqual(keys.snapshot(T0 + 3 * WINDOW).entries, [], 'after a quiet spell nothing is left')
  keys.record(g('api', 'r', 'x'), 'later', T0 + 3 * WINDOW + 5)
  assert.deepEqual(
    keys.snapshot(T0 + 3 * WINDOW + 6).entries.map((e) => e.item.key),
    ['later'],
  )
})

test('bounded whatever the number of keys: 2 × capacity entries at most', () => {
  const keys = new RejectedKeys<boolean>(50, WINDOW, show, T0)
  for (let i = 0; i < 10_000; i++) keys.record(g('api', 'r', 'x'), `k${i}`, T0 + i * 20) // spans both halves
  const snap = keys.snapshot(T0 + 200_000)
  assert.ok(snap.entries.length <= 100, `${snap.entries.length}`)
  assert.equal(snap.total, 10_000)
})

test('a group made anew (a reload compiles new rules) counts apart, and merges into one entry when shown', () => {
  const keys = new RejectedKeys<boolean>(10, WINDOW, show, T0)
  keys.record({ policy: 'api', rule: 'r', reason: 'x', source: false }, 'alice', T0)
  keys.record({ policy: 'api', rule: 'r', reason: 'x', source: false }, 'alice', T0)
  assert.deepEqual(
    keys.snapshot(T0).entries.map((e) => [e.item.key, e.count]),
    [['alice', 2]],
  )
})

test('topItemId tells items apart by policy, rule, reason and raw key', () => {
  const a = { policy: 'p', rule: 'r', reason: 'x', composite: 'k' }
  assert.equal(topItemId(a), topItemId({ ...a }))
  for (const f of ['policy', 'rule', 'reason', 'composite'] as const) assert.notEqual(topItemId(a), topItemId({ ...a, [f]: 'other' }))
})

test('halves start at multiples of the half window: threads started apart turn together', () => {
  const half = WINDOW / 2
  const start = Math.ceil(T0 / half) * half // a half begins here
  const early = new RejectedKeys<boolean>(10, WINDOW, show, start + 1_000)
  const late = new RejectedKeys<boolean>(10, WINDOW, show, start + 100_000)
  for (const k of [early, late]) k.record(g('api', 'r', 'x'), 'first-half', start + 120_000)
  for (const k of [early, late]) k.record(g('api', 'r', 'x'), 'second-half', start + half + 1)
  // A whole window after the first half began, both have dropped it, whenever they started.
  for (const k of [early, late])
    assert.deepEqual(
      k.snapshot(start + WINDOW).entries.map((e) => e.item.key),
      ['second-half'],
    )
})
