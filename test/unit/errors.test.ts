// The error catalogue (src/errors.ts): what src/ throws is a leaf of it, each with its own code, so a
// caller can branch on the class or the code; a base class (one the catalogue extends) is never made.
import assert from 'node:assert/strict'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { ADMIN_ERRORS, AdminRequestError, StoreError, StoreTimeoutError, StoreUnavailableError } from '../../src/errors.js'
import { CallTimeoutError } from '../../src/store/batcher.js'
import { storeError } from '../../src/store/remote.js'

const SRC = fileURLToPath(new URL('../../src/', import.meta.url))

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sources(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  )
}

test('no file of src/ constructs a base class of the catalogue (one that another catalogue class extends)', () => {
  const catalogue = readFileSync(join(SRC, 'errors.ts'), 'utf8')
  const bases = new Set([...catalogue.matchAll(/\bclass \w+ extends (\w+)/g)].map((m) => m[1]!).filter((b) => b !== 'Error'))
  assert.deepEqual([...bases].sort(), ['FairvisorError', 'StoreError'])
  const made: string[] = []
  for (const file of sources(SRC)) {
    const text = readFileSync(file, 'utf8')
    for (const base of bases) {
      for (const m of text.matchAll(new RegExp(`\\bnew ${base}\\(`, 'g')))
        made.push(`${file.slice(SRC.length)}:${text.slice(0, m.index).split('\n').length} new ${base}(`)
    }
  }
  assert.deepEqual(made, [], 'throw the subclass that says what happened')
})

test('a failed remote store call is a StoreUnavailableError; a deadline stays the StoreTimeoutError it is', () => {
  const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6379'), { code: 'ECONNREFUSED' })
  const failed = storeError('redis', refused)
  assert.ok(failed instanceof StoreUnavailableError)
  assert.equal(failed.code, 'FV_STORE_UNAVAILABLE')
  assert.equal(failed.message, 'redis call failed: ECONNREFUSED connect ECONNREFUSED 127.0.0.1:6379')
  assert.equal(failed.cause, refused)
  assert.equal(storeError('postgres', 'not an Error').message, 'postgres call failed: not an Error')
  const late = new CallTimeoutError('postgres', 500)
  assert.equal(storeError('postgres', late), late)
  assert.ok(late instanceof StoreTimeoutError && late instanceof StoreError)
  assert.equal(late.code, 'FV_STORE_TIMEOUT')
})

test('an admin API refusal carries its catalogue code, the HTTP status of that code, and FV_ADMIN_REQUEST', () => {
  const e = new AdminRequestError('admin_unknown_rule', 'policy "api" has no rule "x"')
  assert.deepEqual(
    [e.code, e.adminCode, e.status, e.message],
    ['FV_ADMIN_REQUEST', 'admin_unknown_rule', 404, 'policy "api" has no rule "x"'],
  )
  assert.equal(ADMIN_ERRORS.admin_unauthorized, 401)
  for (const [code, status] of Object.entries(ADMIN_ERRORS)) {
    assert.match(code, /^admin_[a-z_]+$/)
    assert.ok(status >= 400 && status < 600, code)
  }
})
