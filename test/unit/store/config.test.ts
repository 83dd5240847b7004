// Store settings: the deadline's default depends on the store (PostgreSQL's batched statement needs more time than Redis' script); the lease table's size.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { SettingError } from '../../../src/errors.js'
import { loadSettings } from '../../../src/settings.js'

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

test('FAIRVISOR_LEASE_TABLE_KEYS: 8192 by default, 16 to 1048576, handed to the store config of a remote store', () => {
  const redis = { ...base, FAIRVISOR_STORE: 'redis://127.0.0.1:6379' }
  assert.equal(loadSettings(redis).leaseTableKeys, 8192)
  const small = loadSettings({ ...redis, FAIRVISOR_LEASE_TABLE_KEYS: '16' })
  assert.equal(small.leaseTableKeys, 16)
  assert.equal(small.storeConfig.kind === 'redis' && small.storeConfig.leaseKeys, 16)
  const pg = loadSettings({ ...base, FAIRVISOR_STORE: 'postgres://u@127.0.0.1/db', FAIRVISOR_LEASE_TABLE_KEYS: '100000' })
  assert.equal(pg.storeConfig.kind === 'postgres' && pg.storeConfig.leaseKeys, 100_000)
  for (const [bad, says] of [
    ['15', /FAIRVISOR_LEASE_TABLE_KEYS.*15 is out of range; use an integer from 16 to 1048576/],
    ['2000000', /out of range/],
    ['8k', /"8k" is not an integer/],
    ['-1', /not an integer/],
  ] as const)
    assert.throws(
      () => loadSettings({ ...redis, FAIRVISOR_LEASE_TABLE_KEYS: bad }),
      (e: Error) => e instanceof SettingError && says.test(e.message),
      bad,
    )
})
