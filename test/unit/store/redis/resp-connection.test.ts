// The standalone store's own Redis connection: replies matched to commands in
// order when many are pipelined in one write (errors included), nothing sent
// while not ready, in-flight commands failed at once when the server dies, and
// the take script's arguments, encoded once for the hot path, reach Redis as
// the same strings as listArgs() (multi-byte keys, fractions, cached numbers).
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { bulk, encodeCommand, RespConnection, type Reply, type ReplyCallback } from '../../../../src/store/redis/resp-connection.js'
import { encodeArgs, listArgs, visitTakeArgs } from '../../../../src/store/redis/codec.js'
import { tbCheck } from '../../../helpers/store.js'
import type { Check } from '../../../../src/store/store.js'
import { parseRedisUrl } from '../../../../src/store/redis/url.js'
import { startRedis, type RedisServer } from '../../../helpers/redis-servers.js'

const opts = { connectTimeoutMs: 1000, reconnectDelay: (n: number) => Math.min(100 * n, 500) }

function ready(c: RespConnection): Promise<void> {
  return c.status === 'ready' ? Promise.resolve() : new Promise((r) => c.once('ready', () => r()))
}

describe('RespConnection', () => {
  let server: RedisServer
  before(async () => {
    server = await startRedis()
  })
  after(async () => {
    await server?.stop()
  })

  it('matches 2,000 pipelined replies to their commands in order, error replies included', async () => {
    const c = new RespConnection(parseRedisUrl(server.url), opts)
    c.on('error', () => undefined)
    try {
      await ready(c)
      const got: { err?: string; reply?: string }[] = []
      const callbacks: ReplyCallback[] = []
      let text = ''
      for (let i = 0; i < 2000; i++) {
        // Every third command is an error reply; the others echo their index.
        text += encodeCommand(i % 3 === 0 ? ['NOSUCHCOMMAND', String(i)] : ['ECHO', `é-${i}`])
        callbacks.push((err, reply?: Reply) => got.push(err ? { err: err.message } : { reply: (reply as Buffer).toString() }))
      }
      assert.equal(c.send(text, callbacks), true)
      const pong = await c.command(['PING']) // answered after all of the above
      assert.equal(String(pong), 'PONG')
      assert.equal(got.length, 2000)
      for (let i = 0; i < 2000; i++) {
        if (i % 3 === 0) assert.match(got[i]!.err ?? '', /unknown command/i, `#${i}`)
        else assert.equal(got[i]!.reply, `é-${i}`, `#${i}`)
      }
    } finally {
      c.disconnect()
    }
  })

  it('sends nothing while not ready and fails in-flight commands at once when the server dies', async () => {
    const c = new RespConnection(parseRedisUrl(server.url), opts)
    c.on('error', () => undefined)
    try {
      assert.equal(c.send(encodeCommand(['PING']), [() => assert.fail('must not be called')]), false, 'not ready yet')
      await ready(c)
      // A command that blocks for 10 s, then the server is killed: the callback must not wait for it.
      const t0 = performance.now()
      const blocked = c.command(['BLPOP', 'never-pushed', '10']).then(
        () => 'answered',
        (e: Error) => e.message,
      )
      await new Promise((r) => setTimeout(r, 50))
      await server.kill()
      assert.equal(await blocked, 'redis connection lost')
      assert.ok(performance.now() - t0 < 1000, 'failed at the drop, not at the BLPOP timeout')
      assert.equal(c.status, 'connecting')
      await assert.rejects(c.command(['PING']), /not ready/)
      await server.restart()
      await ready(c)
      assert.equal(String(await c.command(['PING'])), 'PONG')
    } finally {
      c.disconnect()
    }
  })

  it('encodeArgs sends Redis exactly the strings listArgs lists', async () => {
    const c = new RespConnection(parseRedisUrl(server.url), opts)
    c.on('error', () => undefined)
    // Echoes numkeys, KEYS and ARGV back as Redis received them.
    const echo =
      'local out = {tostring(#KEYS)} for _, k in ipairs(KEYS) do out[#out + 1] = k end for _, a in ipairs(ARGV) do out[#out + 1] = a end return out'
    const sets: Check[][] = [
      [tbCheck('tb:r:alice', 10, 10, 1)],
      [tbCheck('tb:r:é|日本|🙂', 1e9, 0.5, 3), tbCheck('shadow:tb:s:x y', 2.5, 1 / 3, 0, true)],
      // Same numbers again: now served from the encoded-number cache.
      [tbCheck('tb:r:bob', 1e9, 0.5, 3, true)],
    ]
    try {
      await ready(c)
      for (const checks of sets) {
        const { argc, args } = encodeArgs((visit) => visitTakeArgs(checks, undefined, visit))
        const expected = listArgs((visit) => visitTakeArgs(checks, undefined, visit))
        assert.equal(argc, expected.length)
        const reply = await new Promise<Reply>((resolve, reject) => {
          assert.equal(c.send(`*${argc + 2}\r\n${bulk('EVAL')}${bulk(echo)}${args}`, [(err, r) => (err ? reject(err) : resolve(r!))]), true)
        })
        assert.deepEqual(
          (reply as Buffer[]).map((b) => b.toString('utf8')),
          expected,
        )
      }
    } finally {
      c.disconnect()
    }
  })
})
