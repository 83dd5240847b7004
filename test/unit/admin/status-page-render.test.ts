/**
 * The status page's DOM helpers (admin/status-page-render.ts): valid as
 * embedded, building everything through the DOM (no markup from strings),
 * and their plain formats run here in a bare context.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { createContext, runInContext, Script } from 'node:vm'
import { RENDER } from '../../../src/admin/status-page-render.js'

/** RENDER run in a context of its own (no DOM: only the helpers that need none are called). */
function helpers() {
  const ctx = createContext({ Intl })
  new Script(RENDER).runInContext(ctx)
  return (expr: string): unknown => runInContext(expr, ctx)
}

test('embedded as written: no template literal, backslash or closing script tag', () => {
  assert.doesNotMatch(RENDER, /[`\\]|\$\{/)
  assert.doesNotMatch(RENDER, /<\/script/i)
})

test('text goes in as text: no markup built from strings, no URL', () => {
  assert.doesNotMatch(RENDER, /innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|DOMParser/)
  assert.doesNotMatch(RENDER, /:\/\//, 'SVG lines are copies of the page template, so no namespace URL is needed')
  assert.match(RENDER, /\.textContent = /)
})

test("limits: a rule's algorithm_config as name = value pairs, nested values as JSON", () => {
  const run = helpers()
  assert.equal(run(`limits({ tokens_per_second: 5, burst: 10 })`), 'tokens_per_second = 5; burst = 10')
  assert.equal(run(`limits({ burst: 2, lease: { tokens: 1, ttl_ms: 50 } })`), 'burst = 2; lease = {"tokens":1,"ttl_ms":50}')
  assert.equal(run('limits({})'), '')
  assert.equal(run('limits(undefined)'), '')
})

test('rates and counts: whole counts, rates to a tenth, per second', () => {
  const run = helpers()
  const n = new Intl.NumberFormat(undefined, { maximumFractionDigits: 1 })
  assert.equal(run('formatRate(2.25)'), `${n.format(2.25)}/s`)
  assert.equal(run('formatRate(0)'), '0/s')
  assert.equal(run('formatCount(12)'), '12')
})
