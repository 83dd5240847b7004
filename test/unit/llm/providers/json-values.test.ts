import assert from 'node:assert/strict'
import { test } from 'node:test'
import { count, isObj, positiveCap } from '../../../../src/llm/providers/json-values.js'

test('isObj: a plain object, not null or an array', () => {
  assert.equal(isObj({ a: 1 }), true)
  assert.equal(isObj(null), false)
  assert.equal(isObj([1]), false)
  assert.equal(isObj('x'), false)
})

test('count: finite numbers from 0 up, nothing else', () => {
  assert.equal(count(0), 0)
  assert.equal(count(12.5), 12.5)
  assert.equal(count(-1), undefined)
  assert.equal(count(Number.POSITIVE_INFINITY), undefined)
  assert.equal(count('3'), undefined)
})

test('positiveCap: positive numbers rounded up, integer strings read, none for the rest', () => {
  assert.equal(positiveCap(100), 100)
  assert.equal(positiveCap(2.1), 3)
  assert.equal(positiveCap(' 64 '), 64)
  assert.equal(positiveCap('6.5'), undefined)
  assert.equal(positiveCap(0), undefined)
  assert.equal(positiveCap(-2), undefined)
  assert.equal(positiveCap(Number.NaN), undefined)
  assert.equal(positiveCap(undefined), undefined)
})
