/**
 * The window counter's calendar months (kind.ts): a window of −n is n
 * months of UTC from the 1st 00:00, whatever their length; the count starts
 * over at the boundary and the wait is the seconds to it. The other shapes
 * are covered by the store contract and the expiry property.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { counterLimit, monthSpan, WINDOW_COUNTER_KIND as K } from '../../../../../src/algorithms/kinds/window-counter/kind.js'

const at = (iso: string): number => Date.parse(iso) / 1000

test('monthSpan: the month (or span of months counted from January 1970) an instant falls in, from its UTC day', () => {
  const rows: [string, number, string, string][] = [
    ['2026-01-31T23:59:59.999Z', 1, '2026-01-01', '2026-02-01'],
    ['2026-02-01T00:00:00.000Z', 1, '2026-02-01', '2026-03-01'],
    ['2024-02-29T12:00:00.000Z', 1, '2024-02-01', '2024-03-01'],
    ['2100-02-28T12:00:00.000Z', 1, '2100-02-01', '2100-03-01'],
    ['2026-12-31T23:59:59.999Z', 1, '2026-12-01', '2027-01-01'],
    ['1970-01-01T00:00:00.000Z', 1, '1970-01-01', '1970-02-01'],
    ['2026-05-17T08:00:00.000Z', 3, '2026-04-01', '2026-07-01'],
    ['2026-05-17T08:00:00.000Z', 12, '2026-01-01', '2027-01-01'],
  ]
  for (const [now, n, start, end] of rows)
    assert.deepEqual(monthSpan(at(now), n), [at(`${start}T00:00:00Z`), at(`${end}T00:00:00Z`)], `${now} × ${n}`)
})

test('a month counter: the wait is the seconds to the next 1st 00:00 UTC; the count starts over then, and 28, 30 or 31 days later', () => {
  const l = counterLimit(2, -1, 0)
  const jan = K.step(undefined, l, 2, at('2026-01-20T06:00:00Z'))
  assert.deepEqual([jan.allowed, jan.retryAfter, jan.expireAt], [true, 11 * 86_400 + 18 * 3600, at('2026-02-01T00:00:00Z')])
  const full = K.step(jan.state, l, 1, at('2026-01-31T23:59:59.5Z'))
  assert.deepEqual([full.allowed, full.value, full.retryAfter], [false, 2, 1])
  const feb = K.step(jan.state, l, 1, at('2026-02-01T00:00:00Z'))
  assert.deepEqual([feb.allowed, feb.value, feb.retryAfter], [true, 1, 28 * 86_400])
  assert.equal(K.step(feb.state, l, 2, at('2026-02-28T23:59:59Z')).allowed, false, 'still February')
  assert.equal(K.step(feb.state, l, 2, at('2026-03-01T00:00:00Z')).allowed, true, 'March')
  assert.equal(K.adjust(feb.state, l, 1, at('2026-02-10T00:00:00Z'))!.state.count, 0, 'a refund within the month')
  assert.equal(K.adjust(feb.state, l, 1, at('2026-03-10T00:00:00Z')), undefined, 'nothing charged in March yet')
})

test('a stored window that starts after now is the current one: a clock behind the writer never resets a count', () => {
  for (const l of [counterLimit(3, -1, 0), counterLimit(3, 60, 0)]) {
    const written = K.step(undefined, l, 3, at('2026-03-01T00:00:00.200Z'))
    // Another node, 300 ms behind, still in February by its clock.
    const behind = K.step(written.state, l, 1, at('2026-02-28T23:59:59.900Z'))
    assert.deepEqual([behind.allowed, behind.value], [false, 3], `window ${l.windowS}: the count of the later window holds`)
    assert.equal(behind.state.start, written.state.start)
    assert.equal(K.adjust(written.state, l, 1, at('2026-02-28T23:59:59.900Z'))!.state.count, 2, 'a refund lands in that window')
  }
})
