/**
 * Counters sent to statsd over UDP: a real listener (node:dgram on port 0)
 * receives each counter's gain as `name:delta|c`, packed into datagrams that
 * stay under 1432 bytes; close() sends the last gains; a server whose name
 * does not resolve costs a log line, never a flush's time.
 */
import assert from 'node:assert/strict'
import { createSocket, type Socket } from 'node:dgram'
import { once } from 'node:events'
import { Writable } from 'node:stream'
import { after, before, describe, test } from 'node:test'
import { pino } from 'pino'
import { type Drain, StatsdFlusher } from '../../../src/observe/statsd.js'
import { waitFor } from '../../helpers/wait.js'

const quiet = pino({ level: 'silent' })

describe('StatsdFlusher', () => {
  let server: Socket
  let port: number
  const datagrams: Buffer[] = []
  before(async () => {
    server = createSocket('udp4')
    server.on('message', (m) => datagrams.push(m))
    server.bind(0, '127.0.0.1')
    await once(server, 'listening')
    port = server.address().port
  })
  after(() => server.close())
  const lines = () =>
    datagrams.flatMap((d) =>
      d
        .toString()
        .split('\n')
        .filter((l) => l !== ''),
    )

  /** A drain over `counts`, sending each gain once. */
  function counters(counts: Map<string, number>): Drain {
    const sent = new Map<string, number>()
    return (send) => {
      for (const [name, n] of counts) {
        const delta = n - (sent.get(name) ?? 0)
        if (delta !== 0) send(name, delta)
        sent.set(name, n)
      }
    }
  }

  test('each flush sends what each counter gained; nothing when nothing did', async () => {
    datagrams.length = 0
    const counts = new Map([
      ['ratelimit.service.rate_limit.d.k.total_hits', 3],
      ['ratelimit.service.config_load_success', 1],
    ])
    const f = new StatsdFlusher({ host: '127.0.0.1', port, intervalMs: 3_600_000 }, counters(counts), quiet)
    try {
      f.flush()
      await waitFor(() => lines().length === 2, 'the first flush')
      assert.deepEqual(lines().sort(), ['ratelimit.service.config_load_success:1|c', 'ratelimit.service.rate_limit.d.k.total_hits:3|c'])
      counts.set('ratelimit.service.rate_limit.d.k.total_hits', 5)
      f.flush()
      f.flush() // nothing new: nothing sent
      await waitFor(() => lines().length === 3, 'the second flush')
      assert.equal(lines()[2], 'ratelimit.service.rate_limit.d.k.total_hits:2|c')
    } finally {
      await f.close()
    }
    assert.equal(lines().length, 3)
  })

  test('many counters: every line arrives, in datagrams of at most 1432 bytes', async () => {
    datagrams.length = 0
    const counts = new Map(Array.from({ length: 300 }, (_, i) => [`ratelimit.service.rate_limit.domain.key_value${i}.total_hits`, i + 1]))
    const f = new StatsdFlusher({ host: '127.0.0.1', port, intervalMs: 3_600_000 }, counters(counts), quiet)
    f.flush()
    await waitFor(() => lines().length === 300, 'all 300 lines')
    await f.close()
    assert.ok(datagrams.length > 1, 'more than one datagram')
    for (const d of datagrams) assert.ok(d.length <= 1432, `a datagram of ${d.length} bytes`)
    assert.equal(new Set(lines()).size, 300)
  })

  test('on its interval, and close() sends the last gains', async () => {
    datagrams.length = 0
    const counts = new Map([['a.b', 1]])
    const f = new StatsdFlusher({ host: '127.0.0.1', port, intervalMs: 20 }, counters(counts), quiet)
    await waitFor(() => lines().length === 1, 'a flush on the interval')
    counts.set('a.b', 4)
    await f.close()
    await waitFor(() => lines().length === 2, 'the flush of close()')
    assert.deepEqual(lines(), ['a.b:1|c', 'a.b:3|c'])
  })

  test('a server name that does not resolve: the flush returns at once, the failure is logged', async () => {
    const logged: string[] = []
    const log = pino(
      { level: 'warn' },
      new Writable({
        write(chunk, _enc, done) {
          logged.push(String(chunk))
          done()
        },
      }),
    )
    const f = new StatsdFlusher({ host: 'statsd.invalid', port: 8125, intervalMs: 3_600_000 }, counters(new Map([['a.b', 1]])), log)
    const start = performance.now()
    f.flush()
    assert.ok(performance.now() - start < 50, 'the flush waits for nothing')
    await waitFor(() => logged.some((l) => l.includes('statsd send failed')), 'the failure logged')
    await f.close()
  })
})
