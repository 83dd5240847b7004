// FAIRVISOR_STORE postgres forms and the PostgreSQL settings; bad values name their variable and stop start-up (exit 2).
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { describe, it } from 'node:test'
import { SettingError } from '../../../../src/errors.js'
import { loadSettings } from '../../../../src/settings.js'
import { parsePostgresUrl, postgresSpanAttributes } from '../../../../src/store/postgres/url.js'
import { CLI, ROOT } from '../../../helpers/processes.js'

const base = { FAIRVISOR_BACKEND_URL: 'http://127.0.0.1:1' }
const rejects = (env: Record<string, string>, variable: string): void => {
  assert.throws(
    () => loadSettings({ ...base, ...env }),
    (e: unknown) => e instanceof SettingError && e.message.startsWith(`${variable}: `),
    JSON.stringify(env),
  )
}

describe('FAIRVISOR_STORE postgres forms', () => {
  it('postgres:// and postgresql://, with TLS modes and a socket directory', () => {
    for (const ok of [
      'postgres://app:pw@db.internal:5433/limits',
      'postgresql://app@10.0.0.5/limits?sslmode=verify-full',
      'postgres://app@db/limits?sslmode=require',
      'postgres:///limits?host=/run/postgresql&user=app',
    ]) {
      assert.equal(loadSettings({ ...base, FAIRVISOR_STORE: ok }).store, ok)
    }
    assert.equal(parsePostgresUrl('postgres://app:pw@db.internal:5433/limits').display, 'db.internal:5433/limits')
  })
  it('malformed values stop start-up naming FAIRVISOR_STORE', () => {
    for (const bad of ['postgres://h:99999/db', 'postgres://h:5432', 'postgres:///db', 'postgres://h/db?sslmode=maybe', 'postgres://h/a/b'])
      rejects({ FAIRVISOR_STORE: bad }, 'FAIRVISOR_STORE')
  })
  it('the deadline: FAIRVISOR_STORE_TIMEOUT_MS, FAIRVISOR_REDIS_TIMEOUT_MS as its older name; the new one wins', () => {
    assert.equal(loadSettings(base).storeTimeoutMs, 50)
    assert.equal(loadSettings({ ...base, FAIRVISOR_REDIS_TIMEOUT_MS: '70' }).storeTimeoutMs, 70)
    const both = loadSettings({
      ...base,
      FAIRVISOR_STORE: 'postgres://u@db:5432/app',
      FAIRVISOR_REDIS_TIMEOUT_MS: '70',
      FAIRVISOR_STORE_TIMEOUT_MS: '90',
      FAIRVISOR_PG_POOL_SIZE: '8',
    })
    assert.equal(both.storeTimeoutMs, 90)
    // The store config the factory builds from: the URL parsed once, with that store's settings.
    assert.deepEqual(both.storeConfig, {
      kind: 'postgres',
      target: { connectionString: 'postgres://u@db:5432/app', display: 'db:5432/app' },
      timeoutMs: 90,
      leaseKeys: 8192,
      poolSize: 8,
      prefix: 'fairvisor_',
      unlogged: 'auto',
    })
    rejects({ FAIRVISOR_STORE_TIMEOUT_MS: '0' }, 'FAIRVISOR_STORE_TIMEOUT_MS')
  })
  it('pool size, table prefix and UNLOGGED, with their defaults', () => {
    const d = loadSettings(base)
    assert.deepEqual([d.pgPoolSize, d.pgTablePrefix, d.pgUnlogged], [4, 'fairvisor_', 'auto'])
    const s = loadSettings({ ...base, FAIRVISOR_PG_POOL_SIZE: '8', FAIRVISOR_PG_TABLE_PREFIX: 'rl_', FAIRVISOR_PG_UNLOGGED: 'false' })
    assert.deepEqual([s.pgPoolSize, s.pgTablePrefix, s.pgUnlogged], [8, 'rl_', false])
    assert.equal(loadSettings({ ...base, FAIRVISOR_PG_UNLOGGED: 'true' }).pgUnlogged, true)
    assert.equal(loadSettings({ ...base, FAIRVISOR_PG_UNLOGGED: 'AUTO' }).pgUnlogged, 'auto')
    rejects({ FAIRVISOR_PG_UNLOGGED: 'sometimes' }, 'FAIRVISOR_PG_UNLOGGED')
    rejects({ FAIRVISOR_PG_TABLE_PREFIX: 'x; drop table y' }, 'FAIRVISOR_PG_TABLE_PREFIX')
    rejects({ FAIRVISOR_PG_POOL_SIZE: '0' }, 'FAIRVISOR_PG_POOL_SIZE')
  })
  it('the gateway exits 2 with one line naming FAIRVISOR_STORE, without echoing the password', () => {
    const r = spawnSync(process.execPath, [CLI], {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH,
        FAIRVISOR_PORT: '0',
        ...base,
        FAIRVISOR_STORE: 'postgres://app:hunter2@db:70000/limits',
        FAIRVISOR_LOG_LEVEL: 'silent',
      },
      encoding: 'utf8',
      timeout: 10_000,
    })
    assert.equal(r.status, 2)
    assert.equal(
      r.stderr.trim(),
      'fairvisor: invalid setting FAIRVISOR_STORE: "postgres://app:***@db:70000/limits" is not a URL; use postgres://user[:password]@host[:port]/database[?sslmode=require]',
    )
  })
})

describe("a traced statement's attributes", () => {
  it('the server, port and database of the URL, never its credentials', () => {
    const attrs = (url: string) => postgresSpanAttributes(parsePostgresUrl(url), 'fv_take')
    assert.deepEqual(attrs('postgres://app:hunter2@db.internal:6432/limits'), {
      'db.system.name': 'postgresql',
      'db.namespace': 'limits',
      'db.operation.name': 'SELECT',
      'db.stored_procedure.name': 'fv_take',
      'server.address': 'db.internal',
      'server.port': 6432,
    })
    assert.equal(attrs('postgres://db/limits')['server.port'], undefined)
    assert.equal(attrs('postgres://[::1]:5433/limits')['server.address'], '[::1]')
    assert.equal(attrs('postgres:///limits?host=/run/postgresql')['server.address'], '/run/postgresql')
  })
})
