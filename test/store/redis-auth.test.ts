// The standalone store's handshake against a redis-server this file owns:
// AUTH as an ACL user, AUTH with the default user's password plus SELECT, and
// a wrong password (fail policy, one log line, paced retries).
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { StoreError } from '../../src/errors.js'
import { RedisStore } from '../../src/store/redis/store.js'
import type { StoreLog } from '../../src/store/remote.js'
import { parseRedisUrl } from '../../src/store/redis/url.js'
import type { Check } from '../../src/store/store.js'
import { readBucket, sleep, startRedis, type RedisServer } from '../helpers/redis-servers.js'
import { applyAsync, tbCheck, storeHealth } from '../helpers/store.js'

const tb = (key: string, burst: number, rate: number): Check => tbCheck(key, burst, rate)

describe('redis store handshake (AUTH, SELECT)', () => {
  let server: RedisServer
  const PASS = 'default-secret'
  const cli = (...args: string[]): string => server.cli('--no-auth-warning', '-a', PASS, ...args)
  before(async () => {
    server = await startRedis()
    server.cli('acl', 'setuser', 'gw', 'on', '>gw-secret', '~tb:*', '+@all')
    server.cli('config', 'set', 'requirepass', PASS)
  })
  after(async () => {
    await server?.stop()
  })

  it('authenticates as an ACL user (AUTH user pass)', async () => {
    const store = new RedisStore({ target: parseRedisUrl(`redis://gw:gw-secret@127.0.0.1:${server.port}`), timeoutMs: 500 })
    try {
      assert.equal(await store.ready(3000), true)
      const [o] = await applyAsync(store, [tb('tb:auth:user', 5, 1)], 0)
      assert.deepEqual([o!.allowed, o!.value], [true, 4])
      assert.equal(readBucket(cli, 'tb:auth:user')?.tokens, 4)
      assert.match(cli('client', 'list'), /user=gw /)
    } finally {
      await store.close()
    }
  })

  it('authenticates with the default password and selects the db from the URL', async () => {
    const store = new RedisStore({ target: parseRedisUrl(`redis://:${PASS}@127.0.0.1:${server.port}/2`), timeoutMs: 500 })
    try {
      assert.equal(await store.ready(3000), true)
      await applyAsync(store, [tb('tb:auth:db', 5, 0.0001)], 0)
      await applyAsync(store, [tb('tb:auth:db', 5, 0.0001)], 0)
      assert.equal(Math.floor(readBucket(cli, 'tb:auth:db', '-n', '2')!.tokens), 3)
      assert.equal(cli('-n', '0', 'exists', 'tb:auth:db'), '0')
    } finally {
      await store.close()
    }
  })

  it('a wrong password: calls fail at once, one log line, retries are paced', async () => {
    const lines: string[] = []
    const log: StoreLog = (_level, fields, msg) => lines.push(`${msg} ${String(fields.err ?? '')}`)
    const before = Number(/total_connections_received:(\d+)/.exec(cli('info', 'stats'))![1])
    const store = new RedisStore({ target: parseRedisUrl(`redis://:wrong@127.0.0.1:${server.port}`), timeoutMs: 500, log })
    try {
      // At start-up this is a wrong setting (the gateway exits 2); later, an outage like any other.
      await assert.rejects(store.ready(1000), /WRONGPASS/)
      const t0 = performance.now()
      await assert.rejects(
        Promise.resolve(applyAsync(store, [tb('tb:auth:wrong', 5, 1)], 0)),
        (e: unknown) => e instanceof StoreError && e.code === 'FV_STORE_UNAVAILABLE',
      )
      assert.ok(performance.now() - t0 < 20, 'failed at once, not at the deadline')
      assert.deepEqual(storeHealth(store, 'closed'), { state: 'connecting', ready: false })
      const connections = Number(/total_connections_received:(\d+)/.exec(cli('info', 'stats'))![1]) - before
      // About 1 s of retries at 100, 200, 300, 400 ms: a handful of connections, not a hot loop.
      assert.ok(connections >= 2 && connections <= 8, `connections in ≈ 1 s: ${connections}`)
      const errors = lines.filter((l) => /handshake failed/.test(l))
      assert.equal(errors.length, 1, `logged once: ${JSON.stringify(lines)}`)
      assert.match(errors[0]!, /WRONGPASS|invalid password/i)
    } finally {
      await store.close()
    }
    await sleep(10)
  })
})
