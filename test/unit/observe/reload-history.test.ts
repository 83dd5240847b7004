/** The reloads GET /v1/admin/bundle lists (src/observe/reload-history.ts): newest last, the last RELOADS_KEPT only. */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { RELOADS_KEPT, ReloadHistory } from '../../../src/observe/reload-history.js'

test('each load with its time, result and version (a string; null when none was read); bounded', () => {
  const h = new ReloadHistory()
  h.add({ result: 'applied', version: 7 }, Date.UTC(2026, 0, 1))
  h.add({ result: 'invalid' }, Date.UTC(2026, 0, 1, 0, 0, 1))
  assert.deepEqual(h.list(), [
    { at: '2026-01-01T00:00:00.000Z', result: 'applied', version: '7' },
    { at: '2026-01-01T00:00:01.000Z', result: 'invalid', version: null },
  ])
  for (let i = 0; i < 50; i++) h.add({ result: 'unchanged', version: i }, Date.UTC(2026, 0, 2) + i)
  const list = h.list()
  assert.equal(list.length, RELOADS_KEPT)
  assert.equal(list.at(-1)!.version, '49')
  assert.equal(list[0]!.version, String(50 - RELOADS_KEPT))
  list[0]!.result = 'changed by a caller'
  assert.notEqual(h.list()[0]!.result, 'changed by a caller', 'callers get copies')
})
