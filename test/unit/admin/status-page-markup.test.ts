/**
 * The status page's markup (admin/status-page-markup.ts): accessible (labelled
 * inputs, table headers with a scope, buttons with text, named tables), and
 * every element the script fills is there.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { BODY, STYLE } from '../../../src/admin/status-page-markup.js'
import { RENDER } from '../../../src/admin/status-page-render.js'
import { SCRIPT } from '../../../src/admin/status-page-script.js'

const ids = new Set([...BODY.matchAll(/\sid="([^"]+)"/g)].map((m) => m[1]!))

test('every element the script looks up by id is in the markup, once', () => {
  const used = new Set([...(RENDER + SCRIPT).matchAll(/\$\('([^']+)'\)/g)].map((m) => m[1]!))
  assert.ok(used.size >= 10, `ids used: ${[...used]}`)
  for (const id of used) assert.ok(ids.has(id), `#${id} is used by the script but missing`)
  for (const id of ids) assert.equal(BODY.split(`id="${id}"`).length, 2, `#${id} appears once`)
})

test('each input has a label, each button text, each column header a scope', () => {
  for (const m of BODY.matchAll(/<input\b[^>]*\sid="([^"]+)"/g)) assert.match(BODY, new RegExp(`<label for="${m[1]}">[^<]+</label>`))
  assert.equal(BODY.match(/<input\b/g)?.length, BODY.match(/<input\b[^>]*\sid="/g)?.length, 'every input has an id')
  for (const m of BODY.matchAll(/<button\b[^>]*>([^<]*)<\/button>/g)) assert.ok(m[1]!.trim().length > 0, m[0])
  assert.equal(BODY.match(/<button\b/g)?.length, BODY.match(/<button\b[^>]*>[^<]+<\/button>/g)?.length, 'every button has text')
  for (const m of BODY.matchAll(/<th\b[^>]*>/g)) assert.match(m[0], /\sscope="col"/, m[0])
})

test('each table is named by a caption or a heading', () => {
  for (const m of BODY.matchAll(/<table\b[^>]*>\s*(<caption)?/g)) {
    assert.ok(m[1] !== undefined || /aria-labelledby="[^"]+"/.test(m[0]), `unnamed table: ${m[0]}`)
  }
})

test('the token prompt: a password field that is not remembered, a form that submits nowhere', () => {
  assert.match(BODY, /<input id="token" name="token" type="password" autocomplete="off"/)
  assert.match(BODY, /<form id="login-form">/, 'no action or method: the script handles submit')
  assert.match(BODY, /id="login-error" role="alert"/, 'a refused token is announced')
})

test('markup and style hold no attribute or rule the Content-Security-Policy would block', () => {
  assert.doesNotMatch(BODY, /\sstyle\s*=|\son[a-z]+\s*=|<script|<style|<link|<img|<iframe/i)
  assert.doesNotMatch(STYLE, /url\(|@import|@font-face|expression\(/i)
})
