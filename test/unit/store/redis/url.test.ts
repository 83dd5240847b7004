// FAIRVISOR_STORE forms → connection target; bad values name the variable.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { SettingError } from '../../../../src/errors.js'
import { parseRedisUrl } from '../../../../src/store/redis/url.js'
import { loadSettings } from '../../../../src/settings.js'

describe('FAIRVISOR_STORE redis forms', () => {
  it('redis:// with credentials and db', () => {
    const t = parseRedisUrl('redis://app:p%40ss@cache.internal:6380/4')
    assert.deepEqual(
      [t.kind, t.host, t.port, t.db, t.username, t.password, t.tls],
      ['standalone', 'cache.internal', 6380, 4, 'app', 'p@ss', false],
    )
  })
  it('rediss:// turns TLS on; port defaults to 6379, db to 0', () => {
    const t = parseRedisUrl('rediss://:secret@10.0.0.5')
    assert.deepEqual([t.host, t.port, t.db, t.username, t.password, t.tls], ['10.0.0.5', 6379, 0, undefined, 'secret', true])
  })
  it('unix sockets, with or without db', () => {
    assert.deepEqual(
      [parseRedisUrl('unix:///run/redis.sock?db=2').path, parseRedisUrl('unix:///run/redis.sock?db=2').db],
      ['/run/redis.sock', 2],
    )
    assert.equal(parseRedisUrl('/run/redis.sock').path, '/run/redis.sock')
  })
  it('redis+cluster:// seed list', () => {
    const t = parseRedisUrl('redis+cluster://u:pw@10.0.0.1:7000,10.0.0.2:7001,[::1]:7002')
    assert.equal(t.kind, 'cluster')
    assert.deepEqual(t.nodes, [
      { host: '10.0.0.1', port: 7000 },
      { host: '10.0.0.2', port: 7001 },
      { host: '::1', port: 7002 },
    ])
    assert.deepEqual([t.username, t.password], ['u', 'pw'])
  })
  it('malformed values stop start-up naming FAIRVISOR_STORE', () => {
    for (const bad of [
      'redis://h:99999',
      'redis://h:6379/x',
      'unix://relative.sock',
      'redis+cluster://h:1,h:port',
      'unix:///s.sock?db=-1',
    ]) {
      assert.throws(
        () => loadSettings({ FAIRVISOR_BACKEND_URL: 'http://127.0.0.1:1', FAIRVISOR_STORE: bad }),
        (e: unknown) => e instanceof SettingError && e.message.startsWith('FAIRVISOR_STORE: '),
        bad,
      )
    }
    assert.equal(
      loadSettings({ FAIRVISOR_BACKEND_URL: 'http://127.0.0.1:1', FAIRVISOR_STORE: 'redis://127.0.0.1:6379/1' }).store,
      'redis://127.0.0.1:6379/1',
    )
  })
})
