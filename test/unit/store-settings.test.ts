// The store deadline's default depends on the store: PostgreSQL's batched statement needs more time than Redis' script.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { loadSettings } from '../../src/settings.js'

const base = { FAIRVISOR_BACKEND_URL: 'http://127.0.0.1:1' }

test('the store deadline defaults to 50 ms for Redis and 500 ms for PostgreSQL; a set value wins for both', () => {
  assert.equal(loadSettings({ ...base, FAIRVISOR_STORE: 'redis://127.0.0.1:6379' }).storeTimeoutMs, 50)
  assert.equal(loadSettings({ ...base, FAIRVISOR_STORE: 'postgres://u@127.0.0.1/db' }).storeTimeoutMs, 500)
  assert.equal(
    loadSettings({ ...base, FAIRVISOR_STORE: 'postgresql://u@127.0.0.1/db', FAIRVISOR_STORE_TIMEOUT_MS: '80' }).storeTimeoutMs,
    80,
  )
  assert.equal(loadSettings({ ...base, FAIRVISOR_STORE: 'postgres://u@127.0.0.1/db', FAIRVISOR_REDIS_TIMEOUT_MS: '70' }).storeTimeoutMs, 70)
  assert.equal(loadSettings({ ...base, FAIRVISOR_STORE: 'redis://127.0.0.1:6379', FAIRVISOR_STORE_TIMEOUT_MS: '30' }).storeTimeoutMs, 30)
})
